package harness

import (
	"errors"
	"io"
	"net"
	"sync"
)

// CutMode says how a cut TCPProxy treats connections.
type CutMode int

const (
	// Open forwards connections to the backend.
	Open CutMode = iota
	// Refuse closes new connections at once and resets live ones: the client sees
	// "connection reset" quickly, like a stopped server.
	Refuse
	// BlackHole accepts connections and forwards nothing either way: the client sees
	// only timeouts, like a partitioned network.
	BlackHole
)

// TCPProxy forwards a local port to an API server so a test can cut the server off
// and restore it without restarting it (a restarted envtest server loses its data,
// port and CA).
type TCPProxy struct {
	listener net.Listener
	backend  string

	mu    sync.Mutex
	mode  CutMode
	conns map[net.Conn]struct{}
}

// NewTCPProxy listens on a free loopback port and forwards to backend ("host:port").
func NewTCPProxy(backend string) (*TCPProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCPProxy{listener: l, backend: backend, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *TCPProxy) Addr() string { return p.listener.Addr().String() }

// Cut stops forwarding: existing connections are dropped and new ones are refused or
// black-holed according to mode.
func (p *TCPProxy) Cut(mode CutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore forwards connections again.
func (p *TCPProxy) Restore() { p.Cut(Open) }

// Close stops the proxy.
func (p *TCPProxy) Close() error {
	p.Cut(Refuse)
	return p.listener.Close()
}

func (p *TCPProxy) serve() {
	for {
		c, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go p.handle(c)
	}
}

func (p *TCPProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != Open {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCPProxy) handle(client net.Conn) {
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	switch mode {
	case Refuse:
		_ = client.Close()
		return
	case BlackHole:
		// Hold the connection silently until the client gives up or the next Cut or
		// Restore drops it.
		p.mu.Lock()
		p.conns[client] = struct{}{}
		p.mu.Unlock()
		_, _ = io.Copy(io.Discard, client)
		_ = client.Close()
		return
	}
	backend, err := net.Dial("tcp", p.backend)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(backend) {
		_ = client.Close()
		_ = backend.Close()
		return
	}
	go func() { _, _ = io.Copy(backend, client); _ = backend.Close() }()
	_, _ = io.Copy(client, backend)
	_ = client.Close()
}
