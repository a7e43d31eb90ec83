package mcpserver

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/pyexec/pyexec/client"
)

// fakeArtifacts is the lint and files half of fakeBackend: it answers
// with what a test put in it and records the lint request.
type fakeArtifacts struct {
	diags   []client.Diagnostic
	lintErr error
	listing []client.FileInfo
	content map[string][]byte // path → bytes served by DownloadFile
	listErr error

	amu      sync.Mutex
	lintReq  *client.LintRequest
	listedID string
}

func (f *fakeArtifacts) Lint(_ context.Context, req *client.LintRequest) ([]client.Diagnostic, error) {
	f.amu.Lock()
	f.lintReq = req
	f.amu.Unlock()
	return f.diags, f.lintErr
}

func (f *fakeArtifacts) ListFiles(_ context.Context, id string) ([]client.FileInfo, error) {
	f.amu.Lock()
	f.listedID = id
	f.amu.Unlock()
	return f.listing, f.listErr
}

func (f *fakeArtifacts) DownloadFile(_ context.Context, _, path string) (io.ReadCloser, error) {
	b, ok := f.content[path]
	if !ok {
		return nil, &client.APIError{StatusCode: 404, Message: "file not found"}
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
