package delta

import (
	"context"
	"errors"
)

// MetadataSince returns the table's latest metaData and the version it was
// read at, given known, the metaData as of version knownVersion (nil: none
// known). The latest metaData action in the log is the table's
// (PROTOCOL.md "Change Metadata"), so when the log still holds every
// commit after knownVersion only those are read; otherwise (none known,
// or commits cleaned up meanwhile, a checkpoint standing for them) the
// latest snapshot is. A process that wants a table's schema again and
// again (staging types each file by it) then reads each commit once
// instead of the whole log, checkpoint included, each time.
func (t *Table) MetadataSince(ctx context.Context, knownVersion int64, known *Metadata) (*Metadata, int64, error) {
	if known != nil && knownVersion >= 0 {
		md, v, err := t.metadataAfter(ctx, knownVersion, known)
		if err == nil {
			return md, v, nil
		}
		if !errors.Is(err, errNeedFullListing) {
			return nil, -1, err
		}
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return nil, -1, err
	}
	md := snap.Metadata()
	return &md, snap.Version(), nil
}

// metadataAfter reads the commits after version from, whose metaData is
// known, for a newer metaData; errNeedFullListing when the log no longer
// holds each of them.
func (t *Table) metadataAfter(ctx context.Context, from int64, known *Metadata) (*Metadata, int64, error) {
	l, err := listLog(ctx, t.store, from+1)
	if err != nil {
		return nil, -1, err
	}
	latest := from
	for v := range l.commits {
		latest = max(latest, v)
	}
	commits := make([]*commitData, latest-from)
	for v := from + 1; v <= latest; v++ {
		if _, ok := l.commits[v]; !ok {
			return nil, -1, errNeedFullListing
		}
	}
	err = parallel(ctx, len(commits), func(ctx context.Context, i int) error {
		v := from + 1 + int64(i)
		c, err := readCommit(ctx, t.store, l.commits[v], v)
		commits[i] = c
		return err
	})
	if err != nil {
		return nil, -1, err
	}
	md := known
	for _, c := range commits {
		for _, a := range c.actions {
			if a.MetaData != nil {
				md = a.MetaData
			}
		}
	}
	return md, latest, nil
}
