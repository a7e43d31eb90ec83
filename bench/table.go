package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// row is one line of the report: latency percentiles, or a rate.
type row struct {
	name          string
	p50, p95, p99 time.Duration
	ratio         float64 // p50 / baseline p50; 0 when there is no baseline
	rate          bool
	base, value   float64 // rates (per second), when rate is set
}

func summarize(name string, d []time.Duration, baseline *row) row {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	r := row{name: name, p50: at(0.50), p95: at(0.95), p99: at(0.99)}
	if baseline != nil && baseline.p50 > 0 {
		r.ratio = float64(r.p50) / float64(baseline.p50)
	}
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func renderTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| scenario | p50 | p95 | p99 | ratio |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.rate {
			fmt.Fprintf(&b, "| %s | %.1f / %.1f | | | %.2f× |\n", r.name, r.base, r.value, r.value/r.base)
			continue
		}
		ratio := ""
		if r.ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", r.ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.name, ms(r.p50), ms(r.p95), ms(r.p99), ratio)
	}
	return b.String()
}

func tarOf(name, content string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, content); err != nil {
		return nil, err
	}
	return buf.Bytes(), tw.Close()
}

func multipartBody(tarData []byte, metadata string) (io.Reader, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("tar", "code.tar")
	if err != nil {
		return nil, "", err
	}
	if _, err := fw.Write(tarData); err != nil {
		return nil, "", err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"`)
	h.Set("Content-Type", "application/json")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return nil, "", err
	}
	if _, err := io.WriteString(pw, metadata); err != nil {
		return nil, "", err
	}
	return &buf, mw.FormDataContentType(), mw.Close()
}
