package gcp

import (
	"strings"
	"testing"
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
