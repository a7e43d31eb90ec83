package sessions

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// serveCell starts, in the session's interpreter, a thread answering
// "hello" on port 8000 of the session's loopback.
const serveCell = `import socket, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('127.0.0.1', 8000))
srv.listen()
def answer():
    while True:
        c, _ = srv.accept()
        c.sendall(b'hello')
        c.close()
threading.Thread(target=answer, daemon=True).start()
`

// TestPreviewDialResumesHibernatedSession: a preview connection to a
// hibernated session resumes it (its state comes back, the dial counts as
// activity) and reaches what the session serves once a cell starts it
// again; the app it served before the hibernation is gone, which the dial
// says (the port is closed) rather than calling the session busy.
func TestPreviewDialResumesHibernatedSession(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{HibernateAfter: time.Second, ReapInterval: 20 * time.Millisecond}, false, v)
	id := newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, id, "x = 'kept'\n"+serveCell)
	hibernated(t, svc, id)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := svc.DialPort(ctx, live(t, svc, id), 8000)
	if !errors.Is(err, ErrPortClosed) {
		t.Fatalf("a preview of a hibernated session: %v, want ErrPortClosed after resuming it", err)
	}
	if st := live(t, svc, id).Info().State; st != Idle {
		t.Fatalf("after the preview's dial: %s, want idle (resumed)", st)
	}
	if r := cell(t, svc, id, serveCell+"x"); result(r) != "'kept'" || r.Resumed {
		t.Fatalf("the resumed session: %q resumed=%v, want its state, already resumed", result(r), r.Resumed)
	}
	c, err := svc.DialPort(ctx, live(t, svc, id), 8000)
	if err != nil {
		t.Fatalf("the app started again: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); string(b) != "hello" {
		t.Errorf("the app through the preview: %q, %v", b, err)
	}
}
