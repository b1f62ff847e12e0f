package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNotATable is returned when the store holds no Delta log.
	ErrNotATable = errors.New("not a delta table")
	// ErrTableExists is returned by Create when version 0 already exists.
	ErrTableExists = errors.New("delta table already exists")
	// ErrVersionNotFound is returned when a requested version (or
	// timestamp) cannot be reconstructed from the retained log.
	ErrVersionNotFound = errors.New("delta version not available")
	// ErrCorruptLog is returned when the log is inconsistent: a gap between
	// versions, an unparsable commit or checkpoint.
	ErrCorruptLog = errors.New("corrupt delta log")
	// ErrConflict is returned when a concurrent commit makes ours invalid
	// under Delta's optimistic concurrency rules. The wrapped message names
	// the kind of conflict and the winning version.
	ErrConflict = errors.New("concurrent delta commit conflicts")
	// ErrConcurrentTxn is a kind of ErrConflict: a concurrent commit wrote a
	// txn action for an application id this transaction set or read.
	ErrConcurrentTxn = fmt.Errorf("%w: concurrent transaction for the same application id", ErrConflict)
	// ErrUnsupportedFeature is returned when a table needs a protocol
	// version or table feature this package cannot honour for the attempted
	// operation. The message names the feature(s).
	ErrUnsupportedFeature = errors.New("unsupported delta feature")
	// ErrInvalidCommit is returned when a transaction's actions break a
	// per-commit validity rule (duplicate paths, missing partition values...).
	ErrInvalidCommit = errors.New("invalid delta commit")
	// ErrAppendOnly is returned when a commit would remove data from a table
	// with delta.appendOnly=true.
	ErrAppendOnly = errors.New("delta table is append-only")
	// ErrRetentionTooShort is returned by Vacuum when the requested retention
	// is below the table's configured minimum and Force is not set.
	ErrRetentionTooShort = errors.New("retention shorter than the table's deleted-file retention")
)

// EngineVersion is written in commitInfo.engineInfo as "dsdelta/<version>".
const EngineVersion = "0.1.0"

const (
	logDir                   = "_delta_log/"
	lastCheckpointName       = logDir + "_last_checkpoint"
	defaultCheckpointEvery   = 10
	defaultMaxCommitAttempts = 100
)

// Options tune a Table. The zero value is usable.
type Options struct {
	// Now is the clock for commit timestamps, tombstone expiry and
	// retention; nil means time.Now.
	Now func() time.Time
	// Logger receives warnings (e.g. a failed automatic checkpoint); nil
	// means slog.Default().
	Logger *slog.Logger
	// MaxCommitAttempts bounds how many versions a commit tries after losing
	// races to non-conflicting writers; 0 means 100.
	MaxCommitAttempts int
}

// Table is a Delta table whose root is the root of a store: the log lives
// at _delta_log/ directly under it. A Table holds no cached state; every
// Snapshot call reads the log.
type Table struct {
	store objstore.Store
	opts  Options
}

// Open returns the table rooted at store with default options.
func Open(store objstore.Store) *Table { return OpenWith(store, Options{}) }

// OpenWith returns the table rooted at store with the given options.
func OpenWith(store objstore.Store, opts Options) *Table {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxCommitAttempts <= 0 {
		opts.MaxCommitAttempts = defaultMaxCommitAttempts
	}
	return &Table{store: store, opts: opts}
}

// Store returns the store the table is rooted at.
func (t *Table) Store() objstore.Store { return t.store }

func (t *Table) now() time.Time { return t.opts.Now() }

// Table property names and defaults (Spark's DeltaConfigs).
const (
	PropAppendOnly              = "delta.appendOnly"
	PropCheckpointInterval      = "delta.checkpointInterval"
	PropLogRetentionDuration    = "delta.logRetentionDuration"
	PropDeletedFileRetention    = "delta.deletedFileRetentionDuration"
	PropEnableExpiredLogCleanup = "delta.enableExpiredLogCleanup"
	PropSetTransactionRetention = "delta.setTransactionRetentionDuration"
	PropEnableChangeDataFeed    = "delta.enableChangeDataFeed"
	PropColumnMappingMode       = "delta.columnMapping.mode"
	// PropEnableDeletionVectors lets writers create deletion vectors
	// (PROTOCOL.md "Deletion Vectors"); the table must support the feature.
	PropEnableDeletionVectors   = "delta.enableDeletionVectors"
	defaultDeletedFileRetention = 7 * 24 * time.Hour
	defaultLogRetention         = 30 * 24 * time.Hour
	constraintPropertyPrefix    = "delta.constraints."
	invariantsMetadataKey       = "delta.invariants"
	generationExpressionKey     = "delta.generationExpression"
	identityMetadataKeyPrefix   = "delta.identity."
)

// ParseInterval parses a Delta interval property value such as
// "interval 7 days", "interval 1 week", "168 hours", "interval 2 days 12 hours"
// or "30 days". Units: nanosecond(s), microsecond(s), millisecond(s),
// second(s), minute(s), hour(s), day(s), week(s) (case-insensitive; month and
// year are refused because their length varies).
func ParseInterval(s string) (time.Duration, error) {
	fields := strings.Fields(strings.ToLower(strings.TrimSpace(s)))
	if len(fields) > 0 && fields[0] == "interval" {
		fields = fields[1:]
	}
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, fmt.Errorf("parse interval %q: want <number> <unit> pairs", s)
	}
	var total time.Duration
	for i := 0; i < len(fields); i += 2 {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse interval %q: %q is not an integer", s, fields[i])
		}
		unit, ok := intervalUnits[strings.TrimSuffix(fields[i+1], "s")]
		if !ok {
			return 0, fmt.Errorf("parse interval %q: unknown unit %q", s, fields[i+1])
		}
		if n < 0 || (n > 0 && time.Duration(n) > time.Duration(1<<62)/unit) {
			return 0, fmt.Errorf("parse interval %q: out of range", s)
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

var intervalUnits = map[string]time.Duration{
	"nanosecond":  time.Nanosecond,
	"microsecond": time.Microsecond,
	"millisecond": time.Millisecond,
	"second":      time.Second,
	"minute":      time.Minute,
	"hour":        time.Hour,
	"day":         24 * time.Hour,
	"week":        7 * 24 * time.Hour,
}

// durationProp reads an interval property, falling back to def when unset.
func durationProp(conf map[string]string, key string, def time.Duration) (time.Duration, error) {
	v, ok := conf[key]
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	d, err := ParseInterval(v)
	if err != nil {
		return 0, fmt.Errorf("table property %s: %w", key, err)
	}
	return d, nil
}

// boolProp reads a boolean property ("true"/"false", case-insensitive).
func boolProp(conf map[string]string, key string) bool {
	return strings.EqualFold(strings.TrimSpace(conf[key]), "true")
}

// checkpointInterval returns delta.checkpointInterval (default 10).
func checkpointInterval(conf map[string]string) int64 {
	v := strings.TrimSpace(conf[PropCheckpointInterval])
	if v == "" {
		return defaultCheckpointEvery
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return defaultCheckpointEvery
	}
	return n
}

// exists reports whether name exists in the store.
func exists(ctx context.Context, store objstore.Store, name string) (bool, error) {
	_, err := store.Stat(ctx, name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, objstore.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// CreateOptions describe a new table.
type CreateOptions struct {
	Schema           value.StructType
	PartitionColumns []string
	// Configuration holds table properties (delta.appendOnly,
	// delta.checkpointInterval, delta.logRetentionDuration, ...).
	Configuration map[string]string
	Name          string
	Description   string
}

// Create writes version 0 of a new table at the root of store: protocol
// (1,2), metaData with a random UUID id and createdTime, and a commitInfo
// "CREATE TABLE". It fails with ErrTableExists when version 0 exists.
func Create(ctx context.Context, store objstore.Store, opts CreateOptions) (*Snapshot, error) {
	return Open(store).Create(ctx, opts)
}

// Create is the package-level Create with the table's options.
func (t *Table) Create(ctx context.Context, opts CreateOptions) (*Snapshot, error) {
	if len(opts.Schema.Fields) == 0 {
		return nil, fmt.Errorf("create %s: %w: schema has no columns", t.store.URL(), ErrInvalidCommit)
	}
	now := t.now().UnixMilli()
	conf := maps.Clone(opts.Configuration)
	if conf == nil {
		conf = map[string]string{}
	}
	pc := slices.Clone(opts.PartitionColumns)
	if pc == nil {
		pc = []string{}
	}
	md := Metadata{
		ID:               uuid.NewString(),
		Name:             opts.Name,
		Description:      opts.Description,
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     opts.Schema.SchemaString(),
		PartitionColumns: pc,
		CreatedTime:      &now,
		Configuration:    conf,
	}
	partitionBy, _ := json.Marshal(pc)
	props, _ := json.Marshal(conf)
	params := map[string]string{"isManaged": "false", "partitionBy": string(partitionBy), "properties": string(props)}
	if opts.Description != "" {
		params["description"] = opts.Description
	}
	empty := &Snapshot{table: t, version: -1, checkpointVersion: -1, st: newState()}
	tx := empty.NewTransaction(Operation{Name: "CREATE TABLE", Parameters: params})
	proto := Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	if strings.EqualFold(conf[PropEnableDeletionVectors], "true") {
		proto = proto.WithReaderWriterFeature(FeatureDeletionVectors)
	}
	tx.SetProtocol(proto)
	tx.SetMetadata(md)
	return tx.Commit(ctx)
}
