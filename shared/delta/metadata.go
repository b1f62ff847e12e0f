package delta

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// MetadataAt is a table's metaData as of a version, as MetadataSince
// read it; the zero value knows nothing.
type MetadataAt struct {
	Metadata *Metadata
	Version  int64
	// commit is the version's commit file as listed, to tell the same
	// log from one recreated since (a table deleted and created again
	// starts at version 0, with a new metaData id).
	commit objstore.Info
}

// MetadataSince returns the table's latest metaData, given known, the
// metaData as of an earlier read. The latest metaData action in the log
// is the table's (PROTOCOL.md "Change Metadata"), so when the log still
// holds known's commit, unchanged, and every commit after it, only those
// are read; otherwise (nothing known, commits cleaned up meanwhile, the
// table recreated) the latest snapshot is. A process that wants a
// table's schema again and again (staging types each file by it) then
// reads each commit once instead of the whole log, checkpoint included,
// each time. The Metadata of the result is known's when no commit since
// changed it.
func (t *Table) MetadataSince(ctx context.Context, known MetadataAt) (MetadataAt, error) {
	if known.Metadata != nil && known.commit.Name != "" {
		at, err := t.metadataAfter(ctx, known)
		if err == nil {
			return at, nil
		}
		if !errors.Is(err, errNeedFullListing) {
			return MetadataAt{}, err
		}
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return MetadataAt{}, err
	}
	md := snap.Metadata()
	// The snapshot's commit as its read listed it, for the next call;
	// without it (a version only a checkpoint stands for) the next call
	// reads a snapshot again.
	return MetadataAt{Metadata: &md, Version: snap.Version(), commit: snap.commit}, nil
}

// metadataAfter reads the commits after known's for a newer metaData;
// errNeedFullListing when the log no longer holds known's commit as it
// was, or each commit after it.
func (t *Table) metadataAfter(ctx context.Context, known MetadataAt) (MetadataAt, error) {
	l, commits, err := t.commitsAfter(ctx, known.Version, known.commit)
	if err != nil {
		return MetadataAt{}, err
	}
	latest := known.Version + int64(len(commits))
	at := MetadataAt{Metadata: known.Metadata, Version: latest, commit: l.commits[latest]}
	for _, c := range commits {
		for _, a := range c.actions {
			if a.MetaData != nil {
				at.Metadata = a.MetaData
			}
		}
	}
	return at, nil
}

// commitsAfter lists the log from version from, whose commit file a
// reader listed as known, and reads every commit after it, in version
// order; errNeedFullListing when the log no longer holds from's commit
// as it was (cleaned up, or the table recreated), or each commit after
// it (a version only a checkpoint stands for).
func (t *Table) commitsAfter(ctx context.Context, from int64, known objstore.Info) (*listing, []*commitData, error) {
	l, err := listLog(ctx, t.store, from)
	if err != nil {
		return nil, nil, err
	}
	if c, ok := l.commits[from]; !ok || !sameObject(c, known) {
		return nil, nil, errNeedFullListing
	}
	latest := l.latestVersion()
	for v := from + 1; v <= latest; v++ {
		if _, ok := l.commits[v]; !ok {
			return nil, nil, errNeedFullListing
		}
	}
	commits := make([]*commitData, latest-from)
	err = parallel(ctx, len(commits), func(ctx context.Context, i int) error {
		v := from + 1 + int64(i)
		c, err := readCommit(ctx, t.store, l.commits[v], v)
		commits[i] = c
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", t.store.URL(), err)
	}
	return l, commits, nil
}

// sameObject reports whether a and b list the same write of one object.
func sameObject(a, b objstore.Info) bool {
	return a.Name == b.Name && a.Size == b.Size && a.Generation == b.Generation && a.Updated.Equal(b.Updated)
}
