package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is an in-memory Store for unit tests. It is safe for concurrent use
// and keeps the same semantics as the other backends: atomic writes,
// generations that change on every write, put-if-absent and lexical listing.
type Memory struct {
	mu      sync.Mutex
	objects map[string]memObject
	lastGen int64
}

// memObject is immutable once stored: a write stores a new slice, so readers
// holding the old one keep seeing a consistent old object.
type memObject struct {
	data    []byte
	gen     int64
	updated time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{objects: make(map[string]memObject)}
}

// URL returns "mem://".
func (m *Memory) URL() string { return "mem://" }

// NewReader implements Store.
func (m *Memory) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidName(name); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if err := checkRange(offset); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	m.mu.Lock()
	o, ok := m.objects[name]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("read %s: %w", name, ErrNotExist)
	}
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Stat implements Store.
func (m *Memory) Stat(ctx context.Context, name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return Info{}, fmt.Errorf("stat %s: %w", name, ErrNotExist)
	}
	return o.info(name), nil
}

// Write implements Store. The content is read fully before the lock is taken
// and the preconditions are checked, so the check and the store are atomic.
func (m *Memory) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", name, err)
	}
	if err := checkOptions(opts); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", name, err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return Info{}, fmt.Errorf("write %s: read content: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, exists := m.objects[name]
	switch {
	case opts.IfAbsent && exists:
		return Info{}, fmt.Errorf("write %s: %w", name, ErrExists)
	case opts.IfGenerationMatch > 0 && (!exists || old.gen != opts.IfGenerationMatch):
		return Info{}, fmt.Errorf("write %s (if generation %d): %w", name, opts.IfGenerationMatch, ErrPrecondition)
	}
	m.lastGen++
	o := memObject{data: data, gen: m.lastGen, updated: time.Now()}
	m.objects[name] = o
	return o.info(name), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	// Snapshot under the lock so fn may call back into the store.
	m.mu.Lock()
	var infos []Info
	for name, o := range m.objects {
		if strings.HasPrefix(name, prefix) && name >= startAt {
			infos = append(infos, o.info(name))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[name]; !ok {
		return fmt.Errorf("delete %s: %w", name, ErrNotExist)
	}
	delete(m.objects, name)
	return nil
}

func (o memObject) info(name string) Info {
	return Info{Name: name, Size: int64(len(o.data)), Generation: o.gen, Updated: o.updated}
}
