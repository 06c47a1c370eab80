package sandbox

// The egress proxy of NetworkAllowlist: an HTTP proxy on loopback that the worker runs, one
// per allowlist, and the only TCP port (with an allowlist's loopback ports) that such an
// agent's kernel rules let it connect to. It tunnels CONNECT host:port and forwards plain
// http:// requests, for the hosts of its allowlist only, and never to a port the worker
// denies (the Temporal frontend's, its own). Agents find it in HTTPS_PROXY and its kin; one
// that ignores them reaches nothing. It resolves the names itself, so the agent needs no
// DNS, and its refusals are counted (Refusals).

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Proxy is one allowlist's egress proxy.
type Proxy struct {
	ln       net.Listener
	srv      *http.Server
	allow    map[string]bool // host:port, lower case
	deny     []uint16
	refusals atomic.Int64
	fwd      *httputil.ReverseProxy
}

// StartProxy serves an egress proxy on addr for the host:port entries of allow, never to a
// port of deny.
func StartProxy(addr string, allow []string, deny []uint16) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, allow: map[string]bool{}, deny: slices.Clone(deny)}
	for _, a := range allow {
		if host, port, err := splitHostPort(a); err == nil {
			p.allow[net.JoinHostPort(host, itoa(port))] = true
		}
	}
	p.fwd = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL; r.Out.Host = r.In.Host },
		Transport:     &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext},
		FlushInterval: -1, // streamed answers (server-sent events) go through as they come
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Addr is the proxy's host:port; Port its port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }
func (p *Proxy) Port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// Refusals counts the requests refused since the proxy started.
func (p *Proxy) Refusals() int64 { return p.refusals.Load() }

// Close stops the proxy and its tunnels' listener.
func (p *Proxy) Close() error { return p.srv.Close() }

// allowed reports whether host:port (as a request names it) may be reached.
func (p *Proxy) allowed(hostport, defaultPort string) (string, bool) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, defaultPort
	}
	target := net.JoinHostPort(strings.ToLower(strings.Trim(host, "[]")), port)
	if !p.allow[target] {
		return target, false
	}
	for _, d := range p.deny {
		if port == itoa(d) {
			return target, false
		}
	}
	return target, true
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		target, ok := p.allowed(r.Host, "443")
		if !ok {
			p.refuse(w, target)
			return
		}
		up, err := net.DialTimeout("tcp", target, 30*time.Second)
		if err != nil {
			http.Error(w, "tacp sandbox proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			up.Close()
			http.Error(w, "tacp sandbox proxy: no tunnel", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		down, rw, err := hj.Hijack()
		if err != nil {
			up.Close()
			return
		}
		if n := rw.Reader.Buffered(); n > 0 {
			b, _ := rw.Reader.Peek(n)
			_, _ = up.Write(b)
		}
		go func() { _, _ = io.Copy(up, down); closeWrite(up) }()
		_, _ = io.Copy(down, up)
		down.Close()
		up.Close()
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "tacp sandbox proxy: want CONNECT or an absolute http:// URL", http.StatusBadRequest)
		return
	}
	target, ok := p.allowed(r.URL.Host, "80")
	if !ok {
		p.refuse(w, target)
		return
	}
	p.fwd.ServeHTTP(w, r)
}

func (p *Proxy) refuse(w http.ResponseWriter, target string) {
	p.refusals.Add(1)
	http.Error(w, "tacp sandbox: "+target+" is not in this agent's network allowlist", http.StatusForbidden)
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func itoa(n uint16) string { return strconv.Itoa(int(n)) }
