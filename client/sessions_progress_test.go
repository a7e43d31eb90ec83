package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestCreateSessionWithProgress(t *testing.T) {
	cases := []struct {
		name      string
		answer    func(w http.ResponseWriter)
		wantID    string
		wantLines []string
		wantErr   *APIError
	}{
		{name: "install lines, then the session", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: install\ndata: {\"type\":\"install\",\"data\":\"Resolved 1 package\"}\n\n: keep-alive\n\n"+
				"event: install\ndata: {\"type\":\"install\",\"data\":\"Installed six\"}\n\n"+
				"event: session\ndata: {\"session_id\":\"ses_1\",\"state\":\"idle\"}\n\n")
		}, wantID: "ses_1", wantLines: []string{"Resolved 1 package", "Installed six"}},
		{name: "an error event is an APIError", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: install\ndata: {\"type\":\"install\",\"data\":\"x\"}\n\n"+
				"event: error\ndata: {\"error\":\"install_error: installing nope failed\",\"status\":400}\n\n")
		}, wantLines: []string{"x"}, wantErr: &APIError{StatusCode: 400, Message: "install_error: installing nope failed"}},
		{name: "a server that does not stream answers the session", answer: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"session_id":"ses_2","state":"idle"}`)
		}, wantID: "ses_2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if r.Method != http.MethodPost || r.URL.Path != "/api/v1/sessions" || r.Header.Get("Accept") != "text/event-stream" ||
					!strings.Contains(string(body), `"requirements":"six\n"`) {
					t.Errorf("request %s %s Accept %q body %s", r.Method, r.URL.Path, r.Header.Get("Accept"), body)
				}
				tc.answer(w)
			}))
			defer ts.Close()
			var lines []string
			s, err := New(ts.URL).CreateSessionWithProgress(context.Background(), &SessionRequest{Requirements: "six\n"},
				func(l string) { lines = append(lines, l) })
			if !slices.Equal(lines, tc.wantLines) {
				t.Errorf("lines %q, want %q", lines, tc.wantLines)
			}
			if tc.wantErr != nil {
				var ae *APIError
				if !errors.As(err, &ae) || ae.StatusCode != tc.wantErr.StatusCode || ae.Message != tc.wantErr.Message {
					t.Errorf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || s.SessionID != tc.wantID {
				t.Errorf("session %+v, err %v; want %s", s, err, tc.wantID)
			}
		})
	}
}
