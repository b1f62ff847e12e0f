package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// HistoryEntry is one row of DESCRIBE HISTORY: a retained commit's
// provenance from its commitInfo.
type HistoryEntry struct {
	Version        int64
	Timestamp      time.Time // monotonic commit timestamp, as used by SnapshotAsOf
	Operation      string
	Parameters     map[string]string // non-string JSON values as JSON text
	Metrics        map[string]string
	ReadVersion    *int64
	IsolationLevel string
	IsBlindAppend  *bool
	EngineInfo     string
	TxnID          string
}

// History returns up to limit retained commits, newest first (limit ≤ 0:
// all). Commits without commitInfo (very old writers) have an empty
// Operation.
func (t *Table) History(ctx context.Context, limit int) ([]HistoryEntry, error) {
	timeline, err := t.commitTimeline(ctx)
	if err != nil {
		return nil, err
	}
	n := len(timeline)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]HistoryEntry, 0, n)
	for i := len(timeline) - 1; i >= 0 && len(out) < n; i-- {
		c := timeline[i]
		e := HistoryEntry{Version: c.version, Timestamp: msTime(c.timestampMs)}
		if ci := c.data.info; ci != nil {
			e.Operation = ci.Operation
			e.Parameters = stringMap(ci.OperationParameters)
			e.Metrics = stringMap(ci.OperationMetrics)
			e.ReadVersion = ci.ReadVersion
			e.IsolationLevel = ci.IsolationLevel
			e.IsBlindAppend = ci.IsBlindAppend
			e.EngineInfo = ci.EngineInfo
			e.TxnID = ci.TxnID
		}
		out = append(out, e)
	}
	return out, nil
}

// stringMap renders free-form commitInfo values as strings: strings as
// they are, anything else (numbers, booleans, objects, null) as JSON text.
func stringMap(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			out[k] = fmt.Sprint(v)
			continue
		}
		out[k] = string(b)
	}
	return out
}
