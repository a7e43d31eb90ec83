package provision

import "runtime"

// Tool is a helper program pinned to one version, with the wheel of each
// supported architecture.
type Tool struct {
	// Name is the distribution and the program ("uv", "ruff").
	Name string
	// Version is the pinned version.
	Version string
	// Wheels maps a GOARCH to the wheel holding the program for it.
	Wheels map[string]Wheel
}

// Wheel is one pinned wheel file: the program is its member
// NAME-VERSION.data/scripts/NAME.
type Wheel struct {
	File   string // file name on the index
	SHA256 string // hex digest of the whole file
}

// The musllinux wheels are chosen: their programs are statically linked,
// so they run on any Linux of the architecture and inside a jail that
// mounts no library for them.

// UV is the pinned uv.
var UV = Tool{
	Name:    "uv",
	Version: "0.13.9",
	Wheels: map[string]Wheel{
		"amd64": {File: "uv-0.13.9-py3-none-musllinux_1_1_x86_64.whl",
			SHA256: "2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25"},
		"arm64": {File: "uv-0.13.9-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl",
			SHA256: "5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe"},
	},
}

// Ruff is the pinned ruff.
var Ruff = Tool{
	Name:    "ruff",
	Version: "0.17.6",
	Wheels: map[string]Wheel{
		"amd64": {File: "ruff-0.17.6-py3-none-musllinux_1_2_x86_64.whl",
			SHA256: "3db61f5015600543a581b07fa7f6f64afa0eeedefe16034cadd88c4074087582"},
		"arm64": {File: "ruff-0.17.6-py3-none-musllinux_1_2_aarch64.whl",
			SHA256: "fb589e032806bb942e4fb526f30b80a1a64112147ed9f1d38cc3de2e255b6f45"},
	},
}

// wheel is the tool's wheel for this host's architecture.
func (t Tool) wheel() (Wheel, bool) {
	w, ok := t.Wheels[runtime.GOARCH]
	return w, ok && runtime.GOOS == "linux"
}

// member is the wheel's path of the program.
func (t Tool) member() string { return t.Name + "-" + t.Version + ".data/scripts/" + t.Name }
