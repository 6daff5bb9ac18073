package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/djx-bpf/djx-bpf/profiler/continuous"
)

// ProfilesPath is where a Collector's OTLP/HTTP receiver takes profiles
// while the signal is in development.
const ProfilesPath = "/v1development/profiles"

// Exporter posts windows to an OTLP/HTTP endpoint. It implements
// continuous.Exporter.
type Exporter struct {
	url    string
	host   string
	client *http.Client
	header http.Header
}

// New is an exporter to endpoint, a Collector's OTLP/HTTP address
// ("http://127.0.0.1:4318"; ProfilesPath is added when it has no path),
// labelling profiles with host.
func New(endpoint, host string, header http.Header) (*Exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bad OTLP endpoint %q (give a URL such as http://127.0.0.1:4318): %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("bad OTLP endpoint %q: give a URL such as http://127.0.0.1:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = ProfilesPath
	}
	return &Exporter{url: u.String(), host: host, client: &http.Client{}, header: header}, nil
}

// URL is where the exporter posts.
func (e *Exporter) URL() string { return e.url }

// Export sends one window. An HTTP status the specification says not to
// retry (400, 401, 403, 404, 413, ...) and profiles the receiver rejected
// are permanent errors: the window is dropped, not retried.
func (e *Exporter) Export(ctx context.Context, w *continuous.Window) error {
	body, err := e.encode(w)
	if err != nil {
		return continuous.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return continuous.Permanent(fmt.Errorf("post window %d: %w", w.Seq, err))
	}
	for k, vs := range e.header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("post window %d: %w", w.Seq, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return response(w.Seq, resp.StatusCode, reply)
}

// encode is a window's OTLP export request, gzipped.
func (e *Exporter) encode(w *continuous.Window) ([]byte, error) {
	pd, err := Build(w, e.host)
	if err != nil {
		return nil, err
	}
	// What pprofileotlp's ExportRequest.MarshalProto does, without the
	// gRPC packages that pprofileotlp brings into the binary.
	raw, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(pd)
	if err != nil {
		return nil, fmt.Errorf("encode window %d: %w", w.Seq, err)
	}
	// The fastest level: 5 times as fast as the default on a window's
	// profiles, for a request 15% larger, once a window.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compress window %d: %w", w.Seq, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress window %d: %w", w.Seq, err)
	}
	return buf.Bytes(), nil
}

// response reads the receiver's answer to window seq: retryable (429,
// 502, 503, 504, per OTLP/HTTP), refused (any other failure, or profiles
// rejected in a partial success) or taken.
func response(seq uint64, status int, body []byte) error {
	switch status {
	case http.StatusOK:
		if n, msg := partialSuccess(body); n > 0 {
			return continuous.Permanent(fmt.Errorf("the receiver rejected %d profiles of window %d: %s", n, seq, msg))
		}
		return nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return fmt.Errorf("post window %d: %s", seq, statusText(status, body))
	}
	return continuous.Permanent(fmt.Errorf("post window %d: %s", seq, statusText(status, body)))
}

func statusText(status int, body []byte) string {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 || strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 }) {
		msg = ""
	}
	if msg == "" {
		return fmt.Sprintf("HTTP %d", status)
	}
	return fmt.Sprintf("HTTP %d: %s", status, msg)
}
