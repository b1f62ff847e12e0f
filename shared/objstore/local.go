package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// tmpPrefix starts the name of every temporary file a local store creates.
// List never reports such files and no object name may have a segment
// starting with it, so a half-written object is never visible. A crash can
// leave temporaries behind; they are invisible and safe to delete.
const tmpPrefix = ".objstore-tmp-"

// NewLocal returns a Store on dir, creating the directory if it is missing.
// Object "a/b/c" is the file <dir>/a/b/c, so the tree can be read by any
// other tool (Spark, DuckDB). Close releases nothing.
//
// Writes go to a temporary file beside the target and are renamed into place,
// so readers see the old object or the new one. A put-if-absent write links
// the complete temporary file to the target name with link(2), which fails
// when the name exists: exactly one of any number of concurrent creators wins,
// across goroutines, stores and processes sharing the directory.
//
// The generation of an object is the modification time of its file in
// nanoseconds, which every write sets explicitly (to now, or one nanosecond
// past the replaced file's time if the clock has not moved on), so it changes
// on every write on filesystems that keep nanosecond timestamps (ext4, xfs,
// tmpfs, APFS). On filesystems with coarse timestamps two writes within one
// tick may share a generation.
//
// IfGenerationMatch is honoured by holding an advisory flock(2) on the current
// file from the generation check to the rename. Every Write that replaces an
// existing file and every Delete takes the same lock, so conditional writes
// are atomic against all writers going through a local store, in any
// process; a program that writes into the directory by other means is not
// covered. On systems without flock the lock is not taken and the check is
// best effort.
//
// Limitations of a filesystem: a name cannot be both an object and a
// "directory" of other objects ("a/b" and "a/b/c" cannot coexist), only
// regular files are listed (not symlinks), and Delete removes directories
// left empty, up to the root.
func NewLocal(dir string) (*Bucket, error) {
	b, err := newLocal(dir)
	if err != nil {
		return nil, fmt.Errorf("open local store %s: %w", dir, err)
	}
	return b, nil
}

// newLocal is NewLocal for Open, which names the URL in the error itself.
func newLocal(dir string) (*Bucket, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	return NewBucket(&local{root: abs}), nil
}

// local is the local-directory driver.
type local struct {
	root string // absolute, cleaned
}

// URL returns the absolute path of the root directory.
func (l *local) URL() string { return l.root }

func (l *local) Close() error { return nil }

// path returns the file path of a (valid) name, which must not use the
// names of temporaries.
func (l *local) path(name string) (string, error) {
	for seg := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(seg, tmpPrefix) {
			return "", fmt.Errorf("%w %q: segment starts with the reserved %q", ErrInvalidName, name, tmpPrefix)
		}
	}
	return filepath.Join(l.root, filepath.FromSlash(name)), nil
}

// NewRangeReader opens the file once, so a concurrent replacement does not
// affect a reader already returned.
func (l *local) NewRangeReader(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, mapNotExist(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("not a regular file: %w", ErrNotExist)
	}
	if length < 0 {
		length = st.Size() - offset
	}
	return &sectionReadCloser{SectionReader: io.NewSectionReader(f, offset, max(length, 0)), f: f}, nil
}

type sectionReadCloser struct {
	*io.SectionReader
	f *os.File
}

func (r *sectionReadCloser) Close() error { return r.f.Close() }

func (l *local) Stat(_ context.Context, name string) (Info, error) {
	p, err := l.path(name)
	if err != nil {
		return Info{}, err
	}
	st, err := statObject(p)
	if err != nil {
		return Info{}, err
	}
	return fileInfo(name, st), nil
}

// statObject stats the file of an object at p: ErrNotExist when there is
// none, or when p is not a regular file (a directory of other objects).
func statObject(p string) (fs.FileInfo, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, mapNotExist(err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file: %w", ErrNotExist)
	}
	return st, nil
}

func (l *local) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	p, err := l.path(name)
	if err != nil {
		return Info{}, err
	}
	tmp, err := l.createTemp(p)
	if err != nil {
		return Info{}, err
	}
	tmpName := tmp.Name()
	// After a rename the temporary name is gone; after a link it is a second
	// name of the object; after a failure it is garbage. A failed removal is
	// not reported: the object is published by then, and temporaries are
	// invisible.
	defer os.Remove(tmpName)
	if _, err := io.Copy(&writebackWriter{f: tmp}, &ctxReader{ctx: ctx, r: r}); err != nil {
		tmp.Close()
		return Info{}, err
	}
	// Sync before publishing so that a crash cannot leave a visible name
	// pointing at unwritten data (a Delta commit must never be torn).
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return Info{}, fmt.Errorf("sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}

	if opts.IfAbsent {
		st, err := stampGeneration(tmpName, time.Time{})
		if err != nil {
			return Info{}, err
		}
		if err := os.Link(tmpName, p); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return Info{}, ErrExists
			}
			return Info{}, err
		}
		syncDir(filepath.Dir(p))
		return fileInfo(name, st), nil
	}

	unlock, cur, err := lockCurrent(p)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if opts.IfGenerationMatch > 0 {
		if cur == nil {
			return Info{}, fmt.Errorf("object does not exist: %w", ErrPrecondition)
		}
		if g := generation(cur); g != opts.IfGenerationMatch {
			return Info{}, fmt.Errorf("generation is %d: %w", g, ErrPrecondition)
		}
	}
	var prev time.Time
	if cur != nil {
		prev = cur.ModTime()
	}
	st, err := stampGeneration(tmpName, prev)
	if err != nil {
		return Info{}, err
	}
	if err := os.Rename(tmpName, p); err != nil {
		return Info{}, err
	}
	syncDir(filepath.Dir(p))
	return fileInfo(name, st), nil
}

// Copy gives the object src a second name, dst, by a hard link when dst
// must not exist (IfAbsent): an object's bytes never change once published
// (every write publishes a new file, by rename or link), so two names of
// one file hold what two copies would, without the bytes being read and
// written again; they were synced when src was written, and the new name
// is synced into its directory. The file's modification time, which is
// the generation and the age of both names, moves to now first: a copy is
// a new object (delta's vacuum spares a file it finds unreferenced by its
// age, and a copy is unreferenced until its commit, whatever the age of
// the file it was made from), and the source, never rewritten, is not the
// object of a precondition. A copy onto a name that may exist (its
// generation must then move past the old object's), or one the file
// system cannot link (another device, no hard links), is left to a read
// and a write (errors.ErrUnsupported). A directory a concurrent Delete
// removes is made again, as createTemp does.
func (l *local) Copy(ctx context.Context, src, dst string, opts WriteOptions) (Info, error) {
	if !opts.IfAbsent {
		return Info{}, errors.ErrUnsupported
	}
	sp, err := l.path(src)
	if err != nil {
		return Info{}, err
	}
	dp, err := l.path(dst)
	if err != nil {
		return Info{}, err
	}
	for range 5 {
		if err := ctx.Err(); err != nil {
			return Info{}, err
		}
		st, err := statObject(sp)
		if err != nil {
			return Info{}, err
		}
		if st, err = stampGeneration(sp, st.ModTime()); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // src deleted meanwhile: look again
			}
			return Info{}, err
		}
		if err := os.MkdirAll(filepath.Dir(dp), 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return Info{}, err
		}
		err = os.Link(sp, dp)
		switch {
		case err == nil:
			syncDir(filepath.Dir(dp))
			return fileInfo(dst, st), nil
		case errors.Is(err, fs.ErrExist):
			return Info{}, ErrExists
		case errors.Is(err, fs.ErrNotExist):
			continue // src deleted, or dst's directory: look again
		default:
			return Info{}, errors.ErrUnsupported
		}
	}
	if _, err := os.Stat(sp); err != nil {
		return Info{}, mapNotExist(err)
	}
	return Info{}, errors.ErrUnsupported
}

// writebackChunk is how much of a file is written before the kernel is
// asked to start writing it back.
const writebackChunk = 8 << 20

// writebackWriter writes to f and starts the writeback of every
// writebackChunk bytes as soon as they are written: the disk then writes a
// large file while the rest of it is produced, and the fsync before it is
// published waits for the last chunk only, not for the whole file.
type writebackWriter struct {
	f             *os.File
	off, unsynced int64
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.unsynced += int64(n)
	if w.unsynced >= writebackChunk {
		startWriteback(w.f, w.off, w.unsynced)
		w.off, w.unsynced = w.off+w.unsynced, 0
	}
	return n, err
}

// syncDir makes a new directory entry durable, so that a commit reported
// as written survives a crash. It is best effort: the object is already
// visible, and some systems cannot sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// createTemp creates a temporary file in the directory of p. A concurrent
// Delete may remove a directory it has just found empty, between our MkdirAll
// and our create, or inside MkdirAll between a parent and its child (mkdir
// then fails with ENOENT), so a vanished directory is recreated a few times.
func (l *local) createTemp(p string) (*os.File, error) {
	dir := filepath.Dir(p)
	var err error
	for range 5 {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		var f *os.File
		f, err = os.CreateTemp(dir, tmpPrefix+"*")
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, err
}

// stampGeneration stamps a file (a temporary one, or one Copy links) with
// the time that becomes the object's generation: now, or just past prev
// when the clock has not moved past the file being replaced. It returns the file's stat, taken before the
// file is published: rename and link keep the inode, and a stat of the
// published name could already see a later writer's object.
func stampGeneration(tmp string, prev time.Time) (fs.FileInfo, error) {
	t := time.Now()
	if !t.After(prev) {
		t = prev.Add(time.Nanosecond)
	}
	if err := os.Chtimes(tmp, t, t); err != nil {
		return nil, fmt.Errorf("set modification time: %w", err)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// List walks the directory of the prefix, collects every matching name and
// sorts the names: a walk visits "a/b" before "a-b", but byte order puts '-'
// before '/'.
func (l *local) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	base := l.root
	if dir, _, ok := cutLast(prefix, "/"); ok {
		base = filepath.Join(l.root, filepath.FromSlash(dir))
	}
	var infos []Info
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Directories removed by a concurrent Delete are simply gone,
			// and a prefix below an object ("obj/x") has nothing under it.
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			// Skip subtrees that cannot hold a name starting with prefix.
			if p != base && !strings.HasPrefix(name+"/", prefix) && !strings.HasPrefix(prefix, name+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), tmpPrefix) ||
			!strings.HasPrefix(name, prefix) || name < startAt {
			return nil
		}
		st, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		infos = append(infos, fileInfo(name, st))
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the parent directories the deletion left empty, up to
// (not including) the root, so that deleted prefixes do not linger as empty
// directories.
func (l *local) Delete(_ context.Context, name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	unlock, cur, err := lockCurrent(p)
	if err != nil {
		return err
	}
	if cur == nil {
		unlock()
		return ErrNotExist
	}
	err = os.Remove(p)
	unlock()
	if err != nil {
		return mapNotExist(err)
	}
	for dir := filepath.Dir(p); dir != l.root && strings.HasPrefix(dir, l.root); dir = filepath.Dir(dir) {
		// Fails (and stops) at the first directory that is not empty.
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// mapNotExist turns "no such file" and "a parent is not a directory" into
// ErrNotExist: in an object store both mean the name holds no object.
func mapNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w (%w)", ErrNotExist, err)
	}
	return err
}

// generation is the file's modification time in nanoseconds, at least 1 so
// that a file stamped with the epoch (reproducible builds) still has a valid
// generation.
func generation(st fs.FileInfo) int64 { return max(st.ModTime().UnixNano(), 1) }

func fileInfo(name string, st fs.FileInfo) Info {
	return Info{Name: name, Size: st.Size(), Generation: generation(st), Updated: st.ModTime()}
}

// ctxReader stops a long copy when the context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
