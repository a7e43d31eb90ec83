package provision

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// maxWheelBytes bounds a download: the pinned wheels are 10-25 MiB.
const maxWheelBytes = 256 << 20

// maxPageBytes bounds an index page.
const maxPageBytes = 16 << 20

// anchor matches the links of a PEP 503 page.
var anchor = regexp.MustCompile(`(?is)<a\s[^>]*?href\s*=\s*["']([^"']+)["']`)

// download finds w on the indexes in turn and saves it at dst, checking
// its digest. It returns the URL it came from.
func (p *Provisioner) download(ctx context.Context, t Tool, w Wheel, dst string) (string, error) {
	var errs []error
	for _, index := range p.cfg.IndexURLs {
		src, err := p.locate(ctx, index, t.Name, w.File)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", index, err))
			continue
		}
		if err := p.save(ctx, src, w, dst); err != nil {
			return "", fmt.Errorf("%s: %w", src.Redacted(), err)
		}
		return src.Redacted(), nil
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("%w: no index is configured", ErrNotOnIndex)
	}
	return "", errors.Join(errs...)
}

// locate returns the URL of file on the PEP 503 index: the link of the
// project's page whose last path element is file.
func (p *Provisioner) locate(ctx context.Context, index, project, file string) (*url.URL, error) {
	base, err := url.Parse(strings.TrimSuffix(index, "/") + "/" + project + "/")
	if err != nil {
		return nil, err
	}
	if base.Scheme == "file" {
		u := &url.URL{Scheme: "file", Path: path.Join(base.Path, file)}
		if _, err := os.Stat(u.Path); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotOnIndex, err)
		}
		return u, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/html")
	resp, err := p.httpClient(base).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %s", ErrNotOnIndex, base.Redacted(), resp.Status)
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", base.Redacted(), err)
	}
	for _, m := range anchor.FindAllSubmatch(page, -1) {
		ref, err := url.Parse(html.UnescapeString(string(m[1])))
		if err != nil || path.Base(ref.Path) != file {
			continue
		}
		u := resp.Request.URL.ResolveReference(ref)
		u.Fragment = ""
		if u.Scheme != "https" && u.Scheme != "http" {
			continue
		}
		return u, nil
	}
	return nil, fmt.Errorf("%w: %s does not list %s", ErrNotOnIndex, base.Redacted(), file)
}

// save writes the file at src to dst and checks its SHA-256 against w's;
// on a mismatch dst is removed.
func (p *Provisioner) save(ctx context.Context, src *url.URL, w Wheel, dst string) (err error) {
	var body io.ReadCloser
	if src.Scheme == "file" {
		if body, err = os.Open(src.Path); err != nil {
			return err
		}
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.String(), nil)
		if err != nil {
			return err
		}
		resp, err := p.httpClient(src).Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("GET: %s", resp.Status)
		}
		body = resp.Body
	}
	defer body.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, maxWheelBytes+1))
	if err != nil {
		return err
	}
	if n > maxWheelBytes {
		return fmt.Errorf("the file is larger than %d MiB", maxWheelBytes>>20)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != w.SHA256 {
		return fmt.Errorf("%w: got %s, pinned %s", ErrDigest, got, w.SHA256)
	}
	return nil
}

// unpack extracts the wheel's member to dst, executable.
func unpack(wheel, member, dst string) error {
	zr, err := zip.OpenReader(wheel)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, zf := range zr.File {
		if zf.Name != member {
			continue
		}
		if zf.UncompressedSize64 > maxWheelBytes {
			return fmt.Errorf("%s is larger than %d MiB", member, maxWheelBytes>>20)
		}
		in, err := zf.Open()
		if err != nil {
			return err
		}
		defer in.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, io.LimitReader(in, maxWheelBytes)); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Chmod(dst, 0o755) // whatever the umask: the jail's user runs it

	}
	return fmt.Errorf("the wheel has no %s", member)
}
