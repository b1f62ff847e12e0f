package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dsdelta/dsdelta/shared/datastream"
)

// SchemaMode is how a table follows source schema changes.
type SchemaMode string

// Schema modes.
const (
	// SchemaMerge adds new columns as nullable and keeps dropped ones (null
	// from then on); a type change quarantines the file.
	SchemaMerge SchemaMode = "merge"
	// SchemaOverwrite makes the table take the source schema as of its
	// newest change (by ordering key, not by file arrival): dropped columns
	// go, retyped ones are cast, and the current state and history are
	// rewritten. A late file older than the change that set the schema
	// does not revert it: its rows are conformed to the table's schema.
	SchemaOverwrite SchemaMode = "overwrite"
)

// Mode is what a table's current-state table keeps (docs/table-modes.md);
// the history table is the same in every mode.
type Mode string

// Table modes.
const (
	// ModeCurrent keeps one row per live key (the default).
	ModeCurrent Mode = "current"
	// ModeSoftDelete keeps deleted keys too, marked by _ds_is_deleted and
	// _ds_deleted_at, with the values of their last upsert.
	ModeSoftDelete Mode = "soft_delete"
	// ModeSCD2 keeps one row per version of a key, with _ds_valid_from,
	// _ds_valid_to and _ds_is_current.
	ModeSCD2 Mode = "scd2"
)

// Config is the whole configuration. Zero values mean "default".
type Config struct {
	// Include and Exclude are glob patterns (path.Match syntax, e.g.
	// "shop.*") over table ids "<db>.<table>" (or, with a namespace,
	// "<namespace>.<db>.<table>"). A table is processed when it
	// matches an include pattern (or there are none) and no exclude pattern.
	Include []string `yaml:"include" json:"include"`
	Exclude []string `yaml:"exclude" json:"exclude"`
	// Sources map the root path of a Datastream stream to a lake
	// namespace (and how its SQL Server tables are named); a file under no
	// entry's prefix has no namespace. See Source.
	Sources []Source `yaml:"sources" json:"sources"`
	// SQLServerTableID (sqlserver_table_id: schema|database) is how SQL
	// Server tables are named where a sources entry does not say: by
	// schema (dbo.orders, the default) or by database and schema
	// (sales_dbo.orders).
	SQLServerTableID SQLServerTableID `yaml:"sqlserver_table_id" json:"sqlserver_table_id"`
	// Defaults apply to every table; Tables override them per table id.
	Defaults TableConfig            `yaml:"defaults" json:"defaults"`
	Tables   map[string]TableConfig `yaml:"tables" json:"tables"`
	// Batch limits for one merge batch: a batch stops before the file that
	// would pass any of them, but always takes one file. The merge's memory
	// follows the events and the source bytes of a batch, so those are the
	// limits to set; BatchMaxBytes counts staged Parquet bytes, usually far
	// fewer than the same events take in the Datastream files or in memory.
	BatchMaxFiles       int   `yaml:"batch_max_files" json:"batch_max_files"`
	BatchMaxBytes       int64 `yaml:"batch_max_bytes" json:"batch_max_bytes"`
	BatchMaxEvents      int64 `yaml:"batch_max_events" json:"batch_max_events"`
	BatchMaxSourceBytes int64 `yaml:"batch_max_source_bytes" json:"batch_max_source_bytes"`
	// RecordMaxBytes (max_record_bytes) is the largest single Datastream
	// record (a JSON line or an Avro record) staging accepts; a file with a
	// larger one is quarantined rather than allowed to exhaust the
	// function's memory.
	RecordMaxBytes int64 `yaml:"max_record_bytes" json:"max_record_bytes"`
	// Extensions of data files to stage; others are skipped.
	Extensions []string `yaml:"extensions" json:"extensions"`

	// ReconcileGrace is how old a source object the registry does not know
	// must be before the reconcile stages it: younger ones are left to
	// their notification, which is usually in flight.
	ReconcileGrace Duration `yaml:"reconcile_grace" json:"reconcile_grace"`
	// ReconcileLookback is how far, in Datastream folder time, behind the
	// newest folder of a table a reconcile lists again, to find files
	// written late into old minute folders. Folders still receiving files
	// (a backfill's) are listed for as long as they do, whatever their age.
	ReconcileLookback Duration `yaml:"reconcile_lookback" json:"reconcile_lookback"`
	// ReconcileSince, when set, leaves out source objects in folders older
	// than this instant: a first load of a long-running stream can start
	// there instead of at its first file.
	ReconcileSince time.Time `yaml:"reconcile_since" json:"reconcile_since"`
	// ReconcileMaxFiles bounds the unregistered files one reconcile tick
	// hands to staging; ReconcileMaxListed the objects it lists. Progress
	// is kept, so a larger backlog is caught up over ticks.
	ReconcileMaxFiles  int `yaml:"reconcile_max_files" json:"reconcile_max_files"`
	ReconcileMaxListed int `yaml:"reconcile_max_listed" json:"reconcile_max_listed"`
}

// TableConfig is per-table behaviour.
type TableConfig struct {
	// PrimaryKey overrides source_metadata.primary_keys.
	PrimaryKey []string `yaml:"primary_key" json:"primary_key"`
	// IgnoreColumns are dropped from both tables.
	IgnoreColumns []string   `yaml:"ignore_columns" json:"ignore_columns"`
	SchemaMode    SchemaMode `yaml:"schema_mode" json:"schema_mode"`
	// Mode is what the current-state table keeps: current (default),
	// soft_delete, scd2. A table keeps the mode it was built in: changing
	// it takes 'dsdelta rebuild --mode'.
	Mode Mode `yaml:"mode" json:"mode"`
	// TombstoneRetention keeps deleted keys this long (default 7 days).
	TombstoneRetention Duration `yaml:"tombstone_retention" json:"tombstone_retention"`
	// TargetFileBytes is the size data files are written up to (128 MiB).
	TargetFileBytes int64 `yaml:"target_file_bytes" json:"target_file_bytes"`
	// PartitionColumns of the current-state table (default none); the
	// history table is partitioned by source date.
	PartitionColumns []string `yaml:"partition_columns" json:"partition_columns"`
	// DeletionVectors (deletion_vectors: on|off, default off) lets the
	// merge mark replaced and deleted rows of the current-state table in
	// deletion vectors instead of rewriting their files. "on" upgrades an
	// existing table to the deletionVectors feature, which engines without
	// deletion-vector support can no longer read; "off" writes no new
	// vectors (a table that has some keeps them until compaction).
	DeletionVectors Switch `yaml:"deletion_vectors" json:"deletion_vectors"`
	// DVMinFileBytes: with deletion vectors on, a state file smaller than
	// this is rewritten rather than given a vector (default 1 MiB: below
	// it a rewrite costs about what a vector file and the extra reads of
	// a vector do, and keeps the table free of tiny vectors).
	DVMinFileBytes int64 `yaml:"deletion_vector_min_file_bytes" json:"deletion_vector_min_file_bytes"`
	// DVMaxDeletedShare is the share of a file's rows its deletion vector
	// may mark before compaction rewrites the file without them (default
	// 0.2; 1: never for its vector alone). Higher, compaction rewrites
	// less under random updates and readers skip more deleted rows.
	DVMaxDeletedShare float64 `yaml:"deletion_vector_max_deleted_share" json:"deletion_vector_max_deleted_share"`
	// CompactionMaxBytes caps the bytes of files one maintenance run
	// rewrites in each of the table's Delta tables (default 1 GiB; -1: no
	// cap). Small files are packed first, then the most-deleted files are
	// folded; what is left waits for the next run. Without a cap, a table
	// whose files all pass the deleted share together is rewritten whole
	// in one run, which may not fit a function's timeout.
	CompactionMaxBytes int64 `yaml:"compaction_max_bytes" json:"compaction_max_bytes"`
}

// CompactionCap is the bytes one maintenance run may rewrite in each of
// the table's Delta tables, 0 for no cap (compaction_max_bytes -1).
func (t TableConfig) CompactionCap() int64 { return max(t.CompactionMaxBytes, 0) }

// Switch is an on/off setting; empty means the default.
type Switch string

// Switch values.
const (
	On  Switch = "on"
	Off Switch = "off"
)

// Duration reads "168h", "7d" or "1w" (days and weeks are common for
// retention settings and unknown to time.ParseDuration).
type Duration time.Duration

// UnmarshalYAML accepts a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration parses a Go duration or a whole number of days ("7d") or
// weeks ("2w").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			var v int
			if _, err := fmt.Sscanf(n, "%d", &v); err == nil && fmt.Sprint(v) == n {
				return time.Duration(v) * unit, nil
			}
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use e.g. 36h, 7d, 2w)", s)
	}
	return d, nil
}

// Defaults.
const (
	DefaultTombstoneRetention = 7 * 24 * time.Hour
	DefaultTargetFileBytes    = 128 << 20
	// DefaultCompactionMaxBytes is about a minute of rewriting for a
	// function of one vCPU, so a maintenance run of several tables fits
	// the compact function's 540 s.
	DefaultCompactionMaxBytes = 1 << 30
	DefaultBatchMaxFiles      = 500
	DefaultBatchMaxBytes      = 256 << 20 // staged Parquet bytes
	DefaultBatchMaxEvents     = 100_000
	// DefaultBatchMaxSourceBytes counts the Datastream files' own bytes:
	// Datastream's largest file. A batch's memory does not grow with it
	// (a batch of more than batch_max_events events is merged in steps),
	// and a bulk load merged in few batches writes each row about once.
	DefaultBatchMaxSourceBytes = 1 << 30
	DefaultMaxRecordBytes      = 128 << 20

	// DefaultReconcileGrace lets a notification in flight win over the
	// reconcile: GCS delivers nearly all within seconds.
	DefaultReconcileGrace = 10 * time.Minute
	// DefaultReconcileLookback covers Datastream writing a file late into
	// a minute folder: its folders follow the source time, and a file
	// closes within a minute of its first event.
	DefaultReconcileLookback = 2 * time.Hour
	// DefaultReconcileMaxFiles and DefaultReconcileMaxListed bound one
	// reconcile tick: the files it hands to staging at once, and the
	// objects it lists (about a hundred list calls).
	DefaultReconcileMaxFiles  = 2000
	DefaultReconcileMaxListed = 100_000
)

// DefaultExtensions are the Datastream data file extensions.
var DefaultExtensions = []string{".avro", ".jsonl", ".jsonl.gz", ".json", ".json.gz"}

// Load reads a configuration file (YAML or JSON). Unknown keys are errors,
// so a typo does not silently fall back to a default.
func Load(file string) (Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", file, err)
	}
	return c, nil
}

// Parse parses configuration text and validates it.
func Parse(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	// An empty document decodes as io.EOF: the zero configuration.
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate checks every setting and names the first bad one.
func (c Config) Validate() error {
	for _, p := range append(append([]string(nil), c.Include...), c.Exclude...) {
		if _, err := path.Match(p, "x.y"); err != nil {
			return fmt.Errorf("include/exclude pattern %q: %w", p, err)
		}
	}
	for _, v := range []struct {
		key string
		n   int64
	}{
		{"batch_max_files", int64(c.BatchMaxFiles)},
		{"batch_max_bytes", c.BatchMaxBytes},
		{"batch_max_events", c.BatchMaxEvents},
		{"batch_max_source_bytes", c.BatchMaxSourceBytes},
		{"max_record_bytes", c.RecordMaxBytes},
		{"reconcile_grace", int64(c.ReconcileGrace)},
		{"reconcile_lookback", int64(c.ReconcileLookback)},
		{"reconcile_max_files", int64(c.ReconcileMaxFiles)},
		{"reconcile_max_listed", int64(c.ReconcileMaxListed)},
	} {
		if v.n < 0 {
			return fmt.Errorf("%s must not be negative (0 means the default)", v.key)
		}
	}
	if err := c.SQLServerTableID.validate("sqlserver_table_id"); err != nil {
		return err
	}
	if err := c.validateSources(); err != nil {
		return err
	}
	if err := c.Defaults.validate("defaults"); err != nil {
		return err
	}
	for id, t := range c.Tables {
		if _, err := datastream.ParseTableID(id); err != nil {
			return fmt.Errorf("tables: %q is not a table id <db>.<table> or <namespace>.<db>.<table>: %w", id, err)
		}
		if err := t.validate("tables." + id); err != nil {
			return err
		}
	}
	return nil
}

func (t TableConfig) validate(where string) error {
	switch t.SchemaMode {
	case "", SchemaMerge, SchemaOverwrite:
	default:
		return fmt.Errorf("%s.schema_mode: %q is not merge or overwrite", where, t.SchemaMode)
	}
	switch t.Mode {
	case "", ModeCurrent, ModeSoftDelete, ModeSCD2:
	default:
		return fmt.Errorf("%s.mode: %q is not one of %s, %s, %s", where, t.Mode, ModeCurrent, ModeSoftDelete, ModeSCD2)
	}
	if t.TombstoneRetention < 0 {
		return fmt.Errorf("%s.tombstone_retention must not be negative", where)
	}
	if t.TargetFileBytes < 0 || (t.TargetFileBytes > 0 && t.TargetFileBytes < 1<<20) {
		return fmt.Errorf("%s.target_file_bytes must be at least 1 MiB", where)
	}
	switch t.DeletionVectors {
	case "", On, Off:
	default:
		return fmt.Errorf("%s.deletion_vectors: %q is not on or off", where, t.DeletionVectors)
	}
	if t.DVMinFileBytes < 0 {
		return fmt.Errorf("%s.deletion_vector_min_file_bytes must not be negative", where)
	}
	if t.DVMaxDeletedShare < 0 || t.DVMaxDeletedShare > 1 || math.IsNaN(t.DVMaxDeletedShare) {
		return fmt.Errorf("%s.deletion_vector_max_deleted_share must be between 0 and 1", where)
	}
	if t.CompactionMaxBytes < -1 {
		return fmt.Errorf("%s.compaction_max_bytes must be positive, or -1 for no cap", where)
	}
	for _, k := range t.PrimaryKey {
		if k == "" {
			return fmt.Errorf("%s.primary_key has an empty column name", where)
		}
	}
	return nil
}

// Selected reports whether a table id passes the include/exclude patterns.
func (c Config) Selected(tableID string) bool {
	match := func(ps []string) bool {
		for _, p := range ps {
			if ok, _ := path.Match(p, tableID); ok {
				return true
			}
		}
		return false
	}
	if len(c.Include) > 0 && !match(c.Include) {
		return false
	}
	return !match(c.Exclude)
}

// Table returns the effective settings of a table: its own over the
// defaults over built-in defaults.
func (c Config) Table(tableID string) TableConfig {
	t := c.Defaults
	if o, ok := c.Tables[tableID]; ok {
		if len(o.PrimaryKey) > 0 {
			t.PrimaryKey = o.PrimaryKey
		}
		if len(o.IgnoreColumns) > 0 {
			t.IgnoreColumns = o.IgnoreColumns
		}
		if o.SchemaMode != "" {
			t.SchemaMode = o.SchemaMode
		}
		if o.Mode != "" {
			t.Mode = o.Mode
		}
		if o.TombstoneRetention != 0 {
			t.TombstoneRetention = o.TombstoneRetention
		}
		if o.TargetFileBytes != 0 {
			t.TargetFileBytes = o.TargetFileBytes
		}
		if len(o.PartitionColumns) > 0 {
			t.PartitionColumns = o.PartitionColumns
		}
		if o.DeletionVectors != "" {
			t.DeletionVectors = o.DeletionVectors
		}
		if o.DVMinFileBytes != 0 {
			t.DVMinFileBytes = o.DVMinFileBytes
		}
		if o.DVMaxDeletedShare != 0 {
			t.DVMaxDeletedShare = o.DVMaxDeletedShare
		}
		if o.CompactionMaxBytes != 0 {
			t.CompactionMaxBytes = o.CompactionMaxBytes
		}
	}
	if t.DeletionVectors == "" {
		t.DeletionVectors = Off
	}
	if t.SchemaMode == "" {
		t.SchemaMode = SchemaMerge
	}
	if t.Mode == "" {
		t.Mode = ModeCurrent
	}
	if t.TombstoneRetention == 0 {
		t.TombstoneRetention = Duration(DefaultTombstoneRetention)
	}
	if t.TargetFileBytes == 0 {
		t.TargetFileBytes = DefaultTargetFileBytes
	}
	if t.CompactionMaxBytes == 0 {
		t.CompactionMaxBytes = DefaultCompactionMaxBytes
	}
	return t
}

// MaxFiles is the effective file limit of a batch.
func (c Config) MaxFiles() int {
	if c.BatchMaxFiles > 0 {
		return c.BatchMaxFiles
	}
	return DefaultBatchMaxFiles
}

// MaxBytes is the effective limit of a batch's staged Parquet bytes.
func (c Config) MaxBytes() int64 {
	return orDefault(c.BatchMaxBytes, DefaultBatchMaxBytes)
}

// MaxEvents is the effective limit of the change events one step of a
// merge holds in memory (a staged part, at least), and of a staged part.
func (c Config) MaxEvents() int64 {
	return orDefault(c.BatchMaxEvents, DefaultBatchMaxEvents)
}

// MaxSourceBytes is the effective limit of the bytes of a batch's
// Datastream source files.
func (c Config) MaxSourceBytes() int64 {
	return orDefault(c.BatchMaxSourceBytes, DefaultBatchMaxSourceBytes)
}

// MaxRecordBytes is the effective size limit of one Datastream record.
func (c Config) MaxRecordBytes() int64 {
	return orDefault(c.RecordMaxBytes, DefaultMaxRecordBytes)
}

// Grace is the effective reconcile grace period.
func (c Config) Grace() time.Duration {
	return time.Duration(orDefault(int64(c.ReconcileGrace), int64(DefaultReconcileGrace)))
}

// Lookback is the effective reconcile lookback.
func (c Config) Lookback() time.Duration {
	return time.Duration(orDefault(int64(c.ReconcileLookback), int64(DefaultReconcileLookback)))
}

// MaxReconcileFiles is the effective number of files a reconcile tick
// hands to staging.
func (c Config) MaxReconcileFiles() int {
	return int(orDefault(int64(c.ReconcileMaxFiles), DefaultReconcileMaxFiles))
}

// MaxReconcileListed is the effective number of objects a reconcile tick
// lists.
func (c Config) MaxReconcileListed() int {
	return int(orDefault(int64(c.ReconcileMaxListed), DefaultReconcileMaxListed))
}

// orDefault returns v when it is set (positive), else def.
func orDefault(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// IsDataFile reports whether an object name has a data file extension.
func (c Config) IsDataFile(name string) bool {
	exts := c.Extensions
	if len(exts) == 0 {
		exts = DefaultExtensions
	}
	for _, e := range exts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}
