package preview

import (
	"errors"
	"testing"
)

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"1", 1}, {"80", 80}, {"8501", 8501}, {"65535", 65535},
	} {
		if got, err := ParsePort(tc.in); err != nil || got != tc.want {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "00", "02280", "080", "+80", "-80", " 80", "80 ", "\t80", "80abc", "8o", "65536", "99999",
		"100000", "1e3", "0x50", "８０", "80\x00", "80/", "%38%30"} {
		if got, err := ParsePort(in); !errors.Is(err, ErrBadPort) {
			t.Errorf("ParsePort(%q) = %d, %v; want ErrBadPort", in, got, err)
		}
	}
}
