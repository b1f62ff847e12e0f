package pipeline

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the rules of the reconcile's watermark as functions over
// values, apart from the listing and the registry (reconcile.go), so that
// they can be tested on their own.
//
// Datastream writes a table's files under <folder>/YYYY/MM/DD/HH/mm/<file>,
// the time folders in the change's source time (CDC) or the backfill's
// start time, so names sort by folder time but not by when the files were
// written: a backfill keeps writing into its start minute for hours, and a
// file can close late. A watermark therefore keeps:
//
//   - Start, the name from which each pass lists the folder. It moves
//     forward only after a complete pass, and only to Lookback before the
//     newest time folder seen, or to the oldest time folder that still
//     received a new file within Lookback (a backfill's), whichever is
//     older. A file written later into a folder behind Start is outside
//     what the reconcile looks at: its notification is then the only way
//     in, so Lookback is generous.
//   - Covered, when the last complete pass began. Every object named from
//     Start on and created before Covered was seen by that pass, and was
//     then known to the registry or became a hole: a pass looks up only
//     the objects created since (and the holes), so the registry is asked
//     about what is new, not about the whole window each tick. The same
//     rule keeps a file merged long ago, whose registry record expired,
//     from being staged again: it is never looked up.
//   - Holes, the objects seen and not known to the registry: young ones
//     waiting for their notification, and those handed to staging and not
//     registered yet. Each is looked up by id every tick until the
//     registry knows it, handed to staging again with a growing delay, and
//     dropped when a complete pass no longer lists it (deleted). Their
//     number is bounded (maxHoles): a pass that finds more stops there and
//     resumes later, so a backlog is taken at the pace staging keeps up
//     with, in bounded memory.
//   - Resume, where a pass stopped by a tick's bounds continues.

// watermark is the reconcile's progress through one table folder of a
// source, stored as JSON through the Watermarks coordination.
type watermark struct {
	// Folder is the table folder, relative to the source's prefix.
	Folder string `json:"folder"`
	// Table is the table id the folder's files belong to, once a
	// registered file said so ("" until then).
	Table string `json:"table,omitempty"`
	// Start is the name (relative to the source's prefix) from which every
	// pass lists; "" before the first, the folder's first name.
	Start string `json:"start,omitempty"`
	// Resume is where the pass under way continues; "" when the last pass
	// was complete and the next one starts at Start.
	Resume string `json:"resume,omitempty"`
	// PassStart is when the pass under way began.
	PassStart time.Time `json:"pass_start,omitzero"`
	// Covered is when the last complete pass began; zero before the first.
	Covered time.Time `json:"covered,omitzero"`
	// Newest is the newest time folder seen (zero when the names have no
	// time folders).
	Newest time.Time `json:"newest,omitzero"`
	// Active are time folders behind the newest that received new files:
	// Start stays at or before them while they do.
	Active []activeFolder `json:"active,omitempty"`
	// Holes are the objects seen and not known to the registry.
	Holes []hole `json:"holes,omitempty"`
}

// activeFolder is a time folder that received a new file at Seen.
type activeFolder struct {
	Time time.Time `json:"time"`
	Seen time.Time `json:"seen"`
}

// hole is a source object the registry did not know when it was seen.
// Its JSON keys are short: a watermark holds up to maxHoles of them.
type hole struct {
	Name       string   `json:"n"` // relative to the source's prefix
	Generation int64    `json:"g"`
	Size       int64    `json:"s"`
	Created    unixTime `json:"c"`
	// Tries counts the times it was handed to staging, Next is when it
	// may be handed again (its grace period ends there before the first).
	Tries int      `json:"t,omitempty"`
	Next  unixTime `json:"x"`
	// Pass is the PassStart of the last pass that listed it.
	Pass unixTime `json:"p,omitzero"`
	// fresh marks a hole this tick found, and so has just looked up.
	fresh bool
}

// unixTime is a time stored as Unix microseconds, the precision of GCS's
// object times.
type unixTime struct{ time.Time }

func (t unixTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("0"), nil
	}
	return []byte(strconv.FormatInt(t.UnixMicro(), 10)), nil
}

func (t *unixTime) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return err
	}
	t.Time = time.Time{}
	if n != 0 {
		t.Time = time.UnixMicro(n).UTC()
	}
	return nil
}

// maxHoles bounds the holes of one folder, and so the size of its
// watermark document (about 200 bytes a hole, 320 with a 100-byte folder
// name, within the 512 KiB a coordination document may have).
const maxHoles = 1500

// maxActive bounds the active folders a watermark keeps; the oldest seen
// goes first.
const maxActive = 64

// retryDelay is how long after its try-th hand-over a hole is handed over
// again: the grace period, doubling, at most a day.
func retryDelay(grace time.Duration, tries int) time.Duration {
	d := max(grace, time.Minute)
	for range min(tries, 20) {
		d *= 2
		if d >= 24*time.Hour {
			return 24 * time.Hour
		}
	}
	return d
}

// timeLayout is Datastream's time folder layout, in UTC.
const timeLayout = "2006/01/02/15/04"

// folderTime returns the time folder of name (relative to the source's
// prefix) in folder: ok is false when name has no time folder there.
func folderTime(folder, name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, folder+"/")
	if !ok || len(rest) < len(timeLayout)+1 || rest[len(timeLayout)] != '/' {
		return time.Time{}, false
	}
	t, err := time.Parse(timeLayout, rest[:len(timeLayout)])
	return t, err == nil
}

// timeFolderName is the name at which folder's time folder t starts.
func timeFolderName(folder string, t time.Time) string {
	return folder + "/" + t.UTC().Format(timeLayout) + "/"
}

// startName is where a pass begins: Start, or the folder's first name at
// or after since (the first load of a long-running stream).
func (w *watermark) startName(since time.Time) string {
	s := w.Start
	if !since.IsZero() {
		s = max(s, timeFolderName(w.Folder, since.Truncate(time.Minute)))
	}
	return max(s, w.Folder+"/")
}

// knownSince reports whether an object needs no look-up: the last
// complete pass saw it (it is named from Start on, which every pass lists,
// and was created before that pass began), and it is no hole. skew allows
// for the clocks of the store and of this process.
func (w *watermark) knownSince(created time.Time, skew time.Duration) bool {
	return !w.Covered.IsZero() && created.Before(w.Covered.Add(-skew))
}

// hole returns the index of name among the holes, or -1.
func (w *watermark) hole(name string) int {
	return slices.IndexFunc(w.Holes, func(h hole) bool { return h.Name == name })
}

// sawTime records that the pass listed an object in time folder t,
// created at created: it keeps the newest folder, and marks t active when
// the object is new since the last complete pass and its folder lies more
// than half the lookback behind the newest.
func (w *watermark) sawTime(t, created, now time.Time, lookback time.Duration) {
	if t.After(w.Newest) {
		w.Newest = t
	}
	if w.Covered.IsZero() || created.Before(w.Covered) || !t.Before(w.Newest.Add(-lookback/2)) {
		return
	}
	if i := slices.IndexFunc(w.Active, func(a activeFolder) bool { return a.Time.Equal(t) }); i >= 0 {
		w.Active[i].Seen = now
		return
	}
	w.Active = append(w.Active, activeFolder{Time: t, Seen: now})
	if len(w.Active) > maxActive {
		oldest := 0
		for i, a := range w.Active {
			if a.Seen.Before(w.Active[oldest].Seen) {
				oldest = i
			}
		}
		w.Active = slices.Delete(w.Active, oldest, oldest+1)
	}
}

// completePass closes a pass that listed the folder to its end: Covered
// becomes the pass's start, holes the pass did not list although they
// existed when it began are dropped (their object is gone), active folders
// quiet for a lookback are forgotten, and Start moves forward to the older
// of Lookback before the newest time folder and the oldest active one.
func (w *watermark) completePass(now time.Time, lookback time.Duration, full bool) {
	w.Holes = slices.DeleteFunc(w.Holes, func(h hole) bool {
		return !h.Pass.Equal(w.PassStart) && h.Name >= w.Start && h.Created.Before(w.PassStart)
	})
	w.Covered, w.Resume = w.PassStart, ""
	w.Active = slices.DeleteFunc(w.Active, func(a activeFolder) bool { return a.Seen.Before(now.Add(-lookback)) })
	if full || w.Newest.IsZero() {
		return
	}
	low := w.Newest.Add(-lookback)
	for _, a := range w.Active {
		if a.Time.Before(low) {
			low = a.Time
		}
	}
	w.Start = max(w.Start, timeFolderName(w.Folder, low))
}
