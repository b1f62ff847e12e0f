package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// A table id is unique within one Datastream stream, not across streams:
// every SQL Server database has a dbo schema, two MySQL servers can both
// have a shop database. A table is therefore fed from one stream, the one
// whose file first staged it: that staging claims the table with a small
// object (put-if-absent, so two stagings racing agree on one winner), and
// a file of another stream naming the same table is quarantined, never
// merged into it. The configuration keeps streams apart by giving them
// namespaces (config.Source). Tables staged before claims existed are
// claimed by their first staging after the upgrade.

// claimsDir holds the claims, one object per table id (which is a
// validated id: no '/', no "." or ".." part).
const claimsDir = "_dsdelta/sources/"

func claimName(tableID string) string { return claimsDir + tableID + ".json" }

// sourceClaim names the stream a table is fed from: the bucket and the
// stream's root path in it (datastream.StreamPrefix).
type sourceClaim struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	// File is the file that claimed the table, and Claimed when.
	File    string    `json:"file,omitempty"`
	Claimed time.Time `json:"claimed,omitzero"`
}

// feeds reports whether the claim is that of the stream from.
func (c sourceClaim) feeds(from sourceClaim) bool {
	return c.Bucket == from.Bucket && c.Prefix == from.Prefix
}

// String names the stream, for reasons and logs.
func (c sourceClaim) String() string {
	if c.Bucket == "" {
		return fmt.Sprintf("prefix %q", c.Prefix)
	}
	return fmt.Sprintf("prefix %q of bucket %s", c.Prefix, c.Bucket)
}

// tableCache remembers a value per table id, for a process that stages
// many files of a table, concurrently.
type tableCache[T any] struct {
	mu      sync.Mutex
	byTable map[string]T
}

func (c *tableCache[T]) get(tableID string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byTable[tableID]
	return v, ok
}

func (c *tableCache[T]) put(tableID string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTable == nil {
		c.byTable = map[string]T{}
	}
	c.byTable[tableID] = v
}

// claimSource checks, before anything of the file is staged, that the
// table it names is fed from the file's stream, and claims the table for
// that stream when nobody has. A file of another stream is a permanent
// error that names the table and both streams. A table the configuration
// excludes is not claimed: Stage skips its files.
func (p *Pipeline) claimSource(ctx context.Context, f datastream.SourceFile, tid datastream.TableID) error {
	id := tid.String()
	if !p.Config.Selected(id) {
		return nil
	}
	if tid.Namespace == "" && p.Config.HasNamespace(tid.Database) {
		return permanentError{fmt.Errorf("%s: table %s would be stored in the folder of the namespace %s: a stream without a namespace must not have a database named as a namespace; give this file's stream (%s) a namespace too",
			f.Name, id, tid.Database, sourceClaim{Bucket: f.Bucket, Prefix: datastream.StreamPrefix(f.Name)})}
	}
	from := sourceClaim{Bucket: f.Bucket, Prefix: datastream.StreamPrefix(f.Name)}
	if c, ok := p.claims.get(id); ok && c.feeds(from) {
		return nil
	}
	// Not cached, or cached for another stream: read again, in case the
	// claim was removed to hand the table over.
	c, err := p.claim(ctx, tid, from, f.Name)
	if err != nil {
		return err
	}
	p.claims.put(id, c)
	if !c.feeds(from) {
		return permanentError{fmt.Errorf("%s: table %s is fed from the stream at %s, and this file is from the stream at %s: "+
			"a table id is unique within one stream only, so the two are not merged; give each stream its own namespace "+
			"(sources: [{prefix: ..., namespace: ...}] in the configuration) and replay this file",
			f.Name, id, c, from)}
	}
	return nil
}

// claim returns the table's claim, claiming it for the stream from (by
// the file named file) when it has none.
func (p *Pipeline) claim(ctx context.Context, tid datastream.TableID, from sourceClaim, file string) (sourceClaim, error) {
	id := tid.String()
	c, err := p.readClaim(ctx, id)
	if !errors.Is(err, objstore.ErrNotExist) {
		return c, err
	}
	if err := p.namespaceFolderFree(ctx, tid, file); err != nil {
		return sourceClaim{}, err
	}
	c = from
	c.File, c.Claimed = file, p.now().UTC()
	b, err := json.Marshal(c)
	if err != nil {
		return sourceClaim{}, err
	}
	_, err = p.Lake.Write(ctx, claimName(id), bytes.NewReader(b), objstore.WriteOptions{IfAbsent: true, ContentType: "application/json"})
	switch {
	case errors.Is(err, objstore.ErrExists): // another staging claimed it first
		return p.readClaim(ctx, id)
	case err != nil:
		return sourceClaim{}, fmt.Errorf("claim table %s: %w", id, err)
	}
	p.log().Info("table claimed", "event", "claimed", "table", id, "bucket", c.Bucket, "prefix", c.Prefix, "file", file)
	return c, nil
}

// readClaim reads a table's claim; an unreadable one is a permanent error
// (its files are quarantined until it is deleted).
func (p *Pipeline) readClaim(ctx context.Context, tableID string) (sourceClaim, error) {
	name := claimName(tableID)
	b, err := objstore.ReadAll(ctx, p.Lake, name)
	if err != nil {
		return sourceClaim{}, fmt.Errorf("read the claim of table %s: %w", tableID, err)
	}
	var c sourceClaim
	if err := json.Unmarshal(b, &c); err != nil {
		return sourceClaim{}, permanentError{fmt.Errorf("the claim %s of table %s is unreadable (delete it for the next file to claim the table): %w", name, tableID, err)}
	}
	return c, nil
}

// namespaceFolderFree checks that a table with a namespace is not placed
// inside a table of a stream without one whose database is named as the
// namespace (staged before the namespace was configured): the folder
// <namespace>/<db> must not be a Delta table.
func (p *Pipeline) namespaceFolderFree(ctx context.Context, tid datastream.TableID, file string) error {
	if tid.Namespace == "" {
		return nil
	}
	outer, err := TableSetIn(p.Lake, tid.Namespace+"."+tid.Database)
	if err != nil {
		return err
	}
	errFound := errors.New("found")
	err = outer.State.List(ctx, "_delta_log/", "", func(objstore.Info) error { return errFound })
	switch {
	case errors.Is(err, errFound):
		return permanentError{fmt.Errorf("%s: table %s would be stored inside the table %s of a stream without a namespace; choose another namespace",
			file, tid, outer.ID)}
	case err != nil:
		return fmt.Errorf("look for a table at %s: %w", outer.State.URL(), err)
	}
	return nil
}
