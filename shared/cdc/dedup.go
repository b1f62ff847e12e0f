package cdc

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// The history keeps every event once: a batch's events that an earlier
// batch already appended (a file delivered again, a file Datastream wrote
// twice under two names) are left out. Finding them by reading the history
// costs what the history holds, and a backfill whose events share one
// source timestamp defeats every bound, so each of its batches would read
// all the history written before it.
//
// The state side's lookup already knows, per batch key, the greatest
// ordering key the tables record for it: the state row's order (mode
// soft_delete adds its delete's, mode scd2 the key's last change of any
// kind) and the key's tombstone. Every event of the key that a batch
// appended to the history has an order no greater than that: its batch
// merged it into the state and tombstone tables before any later batch
// began (a batch's step commits the history, then the tombstones, then the
// state, and the next step waits for all three), where it either won, or
// lost to a change of greater order that then won, and an order a table
// records only ever grows. So an event whose order is greater than
// everything the tables record of its key is new to the history, and only
// the others, candidates, are looked for in it: a re-delivery or a late
// event, which CDC moving on and a backfill of new keys do not produce.
// The check then costs what the batch costs.
//
// One thing breaks that chain: tombstone expiry forgets deletes. An event
// older than an expired delete of its key is a candidate as long as its
// source timestamp is not safely after the expiry's cutoff (expiredBefore):
// the expired delete was merged before the cutoff, and no later than the
// event it superseded, so that event's source time lies before the cutoff
// too, give or take the clock skew between the source and the merge
// (expirySkew).

// expiryAppID is the txn application id under which a tombstone table
// records its expiry cutoff, in microseconds since the epoch: tombstones
// deleted before it may be gone. A txn, not a property, so that expiry
// does not conflict with the merges appending tombstones meanwhile (a
// metaData action would).
const expiryAppID = "dsdelta/tombstones-expired-before"

// PropExpiryRecorded marks a tombstone table created by a release that
// records every expiry under expiryAppID: without that txn, nothing
// expired. A table without the mark may have lost tombstones to an older
// release's expiry, until its next expiry records the cutoff.
const PropExpiryRecorded = "dsdelta.tombstoneExpiryRecorded"

// expirySkew is how far the source's clock (source timestamps) and the
// merge's clock (tombstone deletion times) may disagree.
const expirySkew = 24 * time.Hour

// expiredBefore returns the tombstone table's expiry cutoff (0: none
// expired) and whether it is known.
func expiredBefore(snap *delta.Snapshot) (value.Micros, bool) {
	if v, ok := snap.TxnVersion(expiryAppID); ok {
		return value.Micros(v), true
	}
	conf := snap.Configuration()
	if _, expires := conf[delta.PropSetTransactionRetention]; expires {
		return 0, false // the record itself may have expired
	}
	if conf[PropExpiryRecorded] != "true" {
		return 0, false
	}
	return 0, true
}

// knownOrders is what the state side's lookup tells the history's
// duplicate check: per batch key (KeyText), the greatest order the state
// and tombstone tables record of it, and the tombstone expiry cutoff.
// all asks for every event to be checked: the tables were not looked up.
type knownOrders struct {
	orders map[string][]byte
	// unknowable keys have a stored row that records no order.
	unknowable map[string]bool
	cutoff     value.Micros // tombstones deleted before it may be gone
	cutoffOK   bool
	all        bool
}

// checkAll is knownOrders that make every event a candidate.
var checkAll = knownOrders{all: true}

// seen is what the tables tell of whether the history holds an event.
type seen int

const (
	seenNever seen = iota // newer than all the tables record of its key
	seenMaybe             // the history must be read to tell
	seenOnce              // the very change the tables record last of its key
)

// classify tells whether the history may hold c already. The change the
// tables record last of a key was merged, so the history holds it: a
// re-delivery of it needs no read. buf is scratch room for the key's
// text, which a change read for the state alone does not carry: a bulk
// load's million changes are classified without a string each.
func (k knownOrders) classify(c Change, buf *[]byte) seen {
	if k.all {
		return seenMaybe
	}
	var o []byte
	if len(k.orders) > 0 || len(k.unknowable) > 0 {
		if c.KeyText != "" {
			*buf = append((*buf)[:0], c.KeyText...)
		} else {
			*buf = AppendKeyText((*buf)[:0], c.Key)
		}
		if k.unknowable[string(*buf)] {
			return seenMaybe
		}
		o = k.orders[string(*buf)]
	}
	if o != nil {
		switch cmp := bytes.Compare(c.Order, o); {
		case cmp == 0:
			return seenOnce
		case cmp < 0:
			return seenMaybe
		}
	}
	if !k.cutoffOK {
		return seenMaybe // a delete that superseded c may have expired
	}
	if k.cutoff > 0 && c.SourceTS < k.cutoff+value.Micros(expirySkew/time.Microsecond) {
		return seenMaybe
	}
	return seenNever
}

// note records that the tables hold order o (nil: none) of key text.
func (k *knownOrders) note(text string, o []byte) {
	if o == nil {
		return
	}
	if cur := k.orders[text]; cur == nil || bytes.Compare(o, cur) > 0 {
		k.orders[text] = o
	}
}

// newKnownOrders starts the knownOrders of a lookup in tombstone table
// tomb.
func newKnownOrders(tomb *delta.Snapshot, keys int) knownOrders {
	cutoff, ok := expiredBefore(tomb)
	return knownOrders{orders: make(map[string][]byte, keys), unknowable: map[string]bool{}, cutoff: cutoff, cutoffOK: ok}
}

// knownChannel carries a step's knownOrders from the state side to the
// history side exactly once: the state side publishes after its lookup,
// and on every other way out (an error, a step already applied) publishes
// checkAll, so the history side never waits for nothing.
type knownChannel struct {
	ch   chan knownOrders
	once sync.Once
}

func newKnownChannel() *knownChannel { return &knownChannel{ch: make(chan knownOrders, 1)} }

// publish sends k unless something was sent already.
func (c *knownChannel) publish(k knownOrders) {
	if c == nil {
		return
	}
	c.once.Do(func() { c.ch <- k })
}

// await returns what the state side published.
func (c *knownChannel) await(ctx context.Context) (knownOrders, error) {
	if c == nil {
		return checkAll, nil
	}
	select {
	case k := <-c.ch:
		return k, nil
	case <-ctx.Done():
		return knownOrders{}, ctx.Err()
	}
}

// expiryTxnVersion is the cutoff an expiry at cutoff records, given what
// the table recorded before: cutoffs only move forward (a retention made
// longer leaves earlier expiries done).
func expiryTxnVersion(snap *delta.Snapshot, cutoff value.Micros) int64 {
	if v, ok := snap.TxnVersion(expiryAppID); ok && v > int64(cutoff) {
		return v
	}
	return int64(cutoff)
}

// expiryRecordedConf adds PropExpiryRecorded to a new tombstone table's
// configuration.
func expiryRecordedConf(conf map[string]string) map[string]string {
	conf[PropExpiryRecorded] = strconv.FormatBool(true)
	return conf
}
