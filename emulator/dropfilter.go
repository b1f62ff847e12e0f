package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
)

// dropFilter is the endpoint of the notification push subscription: a
// small HTTP proxy in the stack's own process in front of onfile. It loses
// a share of the object notifications on purpose, acknowledging their push
// with 204 without passing it on, as if GCS had never sent them: what the
// scheduled reconcile must make up for. Every other request reaches onfile
// unchanged (method, path, headers but hop-by-hop ones, body) and its
// answer comes back unchanged.
//
// It stays in the path even at a rate of 0, so that SetDropRate works at
// any time without re-pointing the subscription (the emulator may keep
// pushing in-flight messages to the old endpoint) and every run delivers
// notifications the same way. At rate 0 it forwards without parsing or
// drawing anything: one more loopback hop, which BenchmarkDropFilterHop
// puts at about 0.3 ms on a busy 2-core machine, against some 200 ms from
// an object's finalize to its merge (emulator --latency, p50).
type dropFilter struct {
	proxy *httputil.ReverseProxy
	srv   *http.Server
	url   string
	done  chan struct{} // closed when the server has stopped serving

	mu      sync.Mutex
	rate    float64
	rng     *rand.Rand
	dropped []string
}

// startDropFilter serves a drop filter in front of upstream on a free
// loopback port, dropping rate (0 to 1) of the notifications with draws
// seeded by seed.
func startDropFilter(upstream string, rate float64, seed uint64) (*dropFilter, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("drop filter: upstream %q: %w", upstream, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Pub/Sub pushes many messages at once; keep their connections.
	transport.MaxIdleConnsPerHost = 64
	f := &dropFilter{
		proxy: &httputil.ReverseProxy{
			// Rewrite, unlike Director, adds no X-Forwarded-* headers;
			// the Host header stays the one Pub/Sub sent.
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			},
			Transport: transport,
		},
		rng:  rand.New(rand.NewPCG(seed, seed)),
		done: make(chan struct{}),
	}
	f.setRate(rate)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drop filter: listen: %w", err)
	}
	f.url = "http://" + l.Addr().String()
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(f.done)
		_ = f.srv.Serve(l) // ends with ErrServerClosed at close
	}()
	return f, nil
}

// URL is the filter's base URL, the push endpoint in place of onfile's.
func (f *dropFilter) URL() string { return f.url }

func (f *dropFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "drop filter: read the push: "+err.Error(), http.StatusBadRequest)
		return
	}
	if f.drop(body) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.proxy.ServeHTTP(w, r)
}

// drop decides whether to lose a push and records the object it announced
// when it does. A body that is not an object notification always passes.
func (f *dropFilter) drop(body []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rate <= 0 {
		return false
	}
	n, err := datastream.ParsePubSubPush(body)
	if err != nil {
		return false
	}
	if f.rng.Float64() >= f.rate {
		return false
	}
	f.dropped = append(f.dropped, n.Name)
	return true
}

// setRate sets the share of notifications dropped from now on, clamped to
// [0, 1] (NaN counts as 0).
func (f *dropFilter) setRate(p float64) {
	if math.IsNaN(p) {
		p = 0
	}
	f.mu.Lock()
	f.rate = min(max(p, 0), 1)
	f.mu.Unlock()
}

// droppedNames returns the names of the objects whose notifications were
// dropped so far, in the order they were dropped.
func (f *dropFilter) droppedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dropped...)
}

// close stops serving at once and waits for the server's goroutine.
func (f *dropFilter) close() {
	_ = f.srv.Close() // its only error is a listener's failing to close
	<-f.done
}
