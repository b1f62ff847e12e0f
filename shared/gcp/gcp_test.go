package gcp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
)

// TestEnvFromOSReadsTheBatchLimitsFromDSDELTA_CONFIG: the functions get
// every configuration key, the batch and record limits included, through
// DSDELTA_CONFIG, and a bad limit fails naming the variable and the key.
func TestEnvFromOSReadsTheBatchLimitsFromDSDELTA_CONFIG(t *testing.T) {
	t.Setenv("DSDELTA_PROJECT", "p")
	t.Setenv("DSDELTA_LAKE_URL", "gs://lake")
	t.Run("limits set in DSDELTA_CONFIG are the effective ones", func(t *testing.T) {
		t.Setenv("DSDELTA_CONFIG", `{"batch_max_events": 5000, "batch_max_source_bytes": 1048576, "max_record_bytes": 2097152}`)
		e, err := EnvFromOS()
		if err != nil {
			t.Fatal(err)
		}
		if c := e.Config; c.MaxEvents() != 5000 || c.MaxSourceBytes() != 1<<20 || c.MaxRecordBytes() != 2<<20 {
			t.Fatalf("events %d, source bytes %d, record bytes %d; want 5000, 1 MiB, 2 MiB", c.MaxEvents(), c.MaxSourceBytes(), c.MaxRecordBytes())
		}
	})
	t.Run("a negative limit is an error naming the variable and the key", func(t *testing.T) {
		t.Setenv("DSDELTA_CONFIG", "batch_max_source_bytes: -1\n")
		_, err := EnvFromOS()
		if err == nil || !strings.Contains(err.Error(), "DSDELTA_CONFIG") || !strings.Contains(err.Error(), "batch_max_source_bytes") {
			t.Fatalf("err = %v, want one naming DSDELTA_CONFIG and batch_max_source_bytes", err)
		}
	})
}

// TestEnvFromOSReadsTheReconcileSettings: terraform passes the reconcile's
// grace, lookback and first-load date as variables of their own; the
// configuration wins where it sets them, and a bad value names its variable.
func TestEnvFromOSReadsTheReconcileSettings(t *testing.T) {
	t.Setenv("DSDELTA_PROJECT", "p")
	t.Setenv("DSDELTA_LAKE_URL", "gs://lake")
	t.Setenv("DSDELTA_RECONCILE_GRACE", "90s")
	t.Setenv("DSDELTA_RECONCILE_LOOKBACK", "6h")
	t.Setenv("DSDELTA_RECONCILE_SINCE", "2026-02-01T00:00:00Z")
	t.Run("the variables fill what the configuration leaves unset", func(t *testing.T) {
		t.Setenv("DSDELTA_CONFIG", "reconcile_lookback: 3h\n")
		e, err := EnvFromOS()
		if err != nil {
			t.Fatal(err)
		}
		c := e.Config
		if c.Grace() != 90*time.Second || c.Lookback() != 3*time.Hour || !c.ReconcileSince.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("grace %v, lookback %v, since %v", c.Grace(), c.Lookback(), c.ReconcileSince)
		}
	})
	for _, bad := range []struct{ name, value string }{
		{"DSDELTA_RECONCILE_GRACE", "soon"},
		{"DSDELTA_RECONCILE_LOOKBACK", "-1h"},
		{"DSDELTA_RECONCILE_SINCE", "2026-02-01"},
	} {
		t.Run(bad.name+" "+bad.value+" is refused", func(t *testing.T) {
			t.Setenv(bad.name, bad.value)
			if _, err := EnvFromOS(); err == nil || !strings.Contains(err.Error(), bad.name) {
				t.Fatalf("err = %v, want one naming %s", err, bad.name)
			}
		})
	}
}

// TestFinalizeNotificationReadsBackAsTheFile: the reconcile announces a
// file with the notification GCS would have sent; onfile's parser reads
// the same file from it.
func TestFinalizeNotificationReadsBackAsTheFile(t *testing.T) {
	f := datastream.SourceFile{Bucket: "ds", Name: "stream/shop_t/2026/01/05/10/00/a_mysql-cdc-binlog_1_0_0.jsonl",
		Generation: 1767607200123456, Size: 4096, EventType: "OBJECT_FINALIZE", Created: time.Date(2026, 1, 5, 10, 0, 1, 5000, time.UTC)}
	msg, err := FinalizeNotification(f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	push, err := json.Marshal(map[string]any{"message": map[string]any{"attributes": msg.Attributes,
		"data": base64.StdEncoding.EncodeToString(msg.Data)}, "subscription": "s"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := datastream.ParseNotification(datastream.PubSubPublishedType, push)
	if err != nil {
		t.Fatal(err)
	}
	if got != f {
		t.Fatalf("read back %+v, want %+v", got, f)
	}
}
