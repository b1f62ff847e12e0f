package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Env is the functions' configuration, read from the environment.
type Env struct {
	Project           string        // DSDELTA_PROJECT (or GOOGLE_CLOUD_PROJECT)
	SourceBucket      string        // DSDELTA_SOURCE_BUCKET: only objects of this bucket are staged ("" = any)
	SourcePrefix      string        // DSDELTA_SOURCE_PREFIX: only names under this prefix
	LakeURL           string        // DSDELTA_LAKE_URL: gs://bucket[/prefix]
	WakeTopic         string        // DSDELTA_WAKE_TOPIC: topic id or projects/P/topics/T
	DeadLetterTopic   string        // DSDELTA_DEAD_LETTER_TOPIC
	ReconcileTopic    string        // DSDELTA_RECONCILE_TOPIC: where the reconcile publishes the files it finds ("" = stage them in the tick)
	FirestoreDatabase string        // DSDELTA_FIRESTORE_DATABASE (default "(default)")
	CollectionPrefix  string        // DSDELTA_FIRESTORE_PREFIX (tests and emulators)
	MergeBudget       time.Duration // DSDELTA_MERGE_BUDGET
	LeaseTTL          time.Duration // DSDELTA_LEASE_TTL: table lease time to live (pipeline default when 0)
	LogLevel          slog.Level    // DSDELTA_LOG_LEVEL
	Config            config.Config // DSDELTA_CONFIG (inline YAML/JSON) + DSDELTA_TOMBSTONE_RETENTION
}

// EnvFromOS reads and validates the environment.
func EnvFromOS() (Env, error) {
	e := Env{
		Project:           first(os.Getenv("DSDELTA_PROJECT"), os.Getenv("GOOGLE_CLOUD_PROJECT")),
		SourceBucket:      os.Getenv("DSDELTA_SOURCE_BUCKET"),
		SourcePrefix:      strings.Trim(os.Getenv("DSDELTA_SOURCE_PREFIX"), "/"),
		LakeURL:           os.Getenv("DSDELTA_LAKE_URL"),
		WakeTopic:         os.Getenv("DSDELTA_WAKE_TOPIC"),
		DeadLetterTopic:   os.Getenv("DSDELTA_DEAD_LETTER_TOPIC"),
		ReconcileTopic:    os.Getenv("DSDELTA_RECONCILE_TOPIC"),
		FirestoreDatabase: first(os.Getenv("DSDELTA_FIRESTORE_DATABASE"), firestore.DefaultDatabaseID),
		CollectionPrefix:  os.Getenv("DSDELTA_FIRESTORE_PREFIX"),
	}
	if e.Project == "" {
		return e, errors.New("DSDELTA_PROJECT is not set")
	}
	if !strings.HasPrefix(e.LakeURL, "gs://") {
		return e, fmt.Errorf("DSDELTA_LAKE_URL %q must be gs://bucket[/prefix]", e.LakeURL)
	}
	if v := os.Getenv("DSDELTA_MERGE_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("DSDELTA_MERGE_BUDGET %q is not a positive duration", v)
		}
		e.MergeBudget = d
	}
	if v := os.Getenv("DSDELTA_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("DSDELTA_LEASE_TTL %q is not a positive duration", v)
		}
		e.LeaseTTL = d
	}
	if v := os.Getenv("DSDELTA_LOG_LEVEL"); v != "" {
		if err := e.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return e, fmt.Errorf("DSDELTA_LOG_LEVEL %q: %w", v, err)
		}
	}
	if v := os.Getenv("DSDELTA_CONFIG"); v != "" {
		c, err := config.Parse([]byte(v))
		if err != nil {
			return e, fmt.Errorf("DSDELTA_CONFIG: %w", err)
		}
		e.Config = c
	}
	if err := reconcileEnv(&e.Config); err != nil {
		return e, err
	}
	if v := os.Getenv("DSDELTA_TOMBSTONE_RETENTION"); v != "" && e.Config.Defaults.TombstoneRetention == 0 {
		d, err := config.ParseDuration(v)
		if err != nil {
			return e, fmt.Errorf("DSDELTA_TOMBSTONE_RETENTION: %w", err)
		}
		e.Config.Defaults.TombstoneRetention = config.Duration(d)
	}
	return e, nil
}

// reconcileEnv fills the reconcile's settings that the configuration does
// not set from DSDELTA_RECONCILE_GRACE, _LOOKBACK (durations) and _SINCE
// (RFC 3339), as terraform's variables set them.
func reconcileEnv(c *config.Config) error {
	for _, d := range []struct {
		name string
		dst  *config.Duration
	}{{"DSDELTA_RECONCILE_GRACE", &c.ReconcileGrace}, {"DSDELTA_RECONCILE_LOOKBACK", &c.ReconcileLookback}} {
		if v := os.Getenv(d.name); v != "" && *d.dst == 0 {
			v, err := config.ParseDuration(v)
			if err != nil || v <= 0 {
				return fmt.Errorf("%s %q is not a positive duration", d.name, os.Getenv(d.name))
			}
			*d.dst = config.Duration(v)
		}
	}
	if v := os.Getenv("DSDELTA_RECONCILE_SINCE"); v != "" && c.ReconcileSince.IsZero() {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("DSDELTA_RECONCILE_SINCE %q is not an RFC 3339 instant such as 2026-01-31T00:00:00Z", v)
		}
		c.ReconcileSince = t
	}
	return nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Logger is a JSON logger with Cloud Logging's severity and message keys.
func Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.MessageKey:
				a.Key = "message"
			case slog.LevelKey:
				a.Key = "severity"
				if l, ok := a.Value.Any().(slog.Level); ok && l == slog.LevelWarn {
					a.Value = slog.StringValue("WARNING")
				}
			case slog.TimeKey:
				a.Key = "time"
			}
			return a
		},
	}))
}

// Services are the long-lived clients of a function instance and the
// pipeline over them. They provide what each function's handler asks for
// (onfile.Services, merge.Services, compact.Services): the pipeline's use
// cases, the source filter, dead letters and the logger.
type Services struct {
	*pipeline.Pipeline
	Env        Env
	DeadLetter *pubsub.Publisher
	// reconcile publishes the files the reconcile finds; nil when
	// DSDELTA_RECONCILE_TOPIC is not set.
	reconcile *pubsub.Publisher
	close     func()
}

// Close releases the clients.
func (s *Services) Close() { s.close() }

// Log returns the instance's logger, the pipeline's.
func (s *Services) Log() *slog.Logger { return s.Pipeline.Logger }

// InSource reports whether an object belongs to the configured source.
func (s *Services) InSource(bucket, name string) bool {
	if s.Env.SourceBucket != "" && bucket != s.Env.SourceBucket {
		return false
	}
	return s.Env.SourcePrefix == "" || strings.HasPrefix(name, s.Env.SourcePrefix+"/")
}

// New builds the services for env.
func New(ctx context.Context, env Env, holder string) (*Services, error) {
	logger := Logger(env.LogLevel)
	gcs, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("storage client: %w", err)
	}
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(env.LakeURL, "gs://"), "/")
	lake := gcsstore.New(gcs, bucket, strings.Trim(prefix, "/"))
	sources := gcsstore.NewBuckets(gcs)
	closeStorage := func() {
		sources.Close()
		lake.Close()
		gcs.Close()
	}
	fs, err := firestore.NewClientWithDatabase(ctx, env.Project, env.FirestoreDatabase)
	if err != nil {
		closeStorage()
		return nil, fmt.Errorf("firestore client: %w", err)
	}
	co, err := firestorecoord.New(ctx, fs, firestorecoord.Options{Prefix: env.CollectionPrefix})
	if err != nil {
		closeStorage()
		fs.Close()
		return nil, err
	}
	ps, err := pubsub.NewClient(ctx, env.Project)
	if err != nil {
		closeStorage()
		fs.Close()
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	var wake *pubsub.Publisher
	var waker pipeline.Waker
	if env.WakeTopic != "" {
		wake = ps.Publisher(env.WakeTopic)
		waker = pubsubWaker{wake}
	}
	var dead, reconcile *pubsub.Publisher
	if env.DeadLetterTopic != "" {
		dead = ps.Publisher(env.DeadLetterTopic)
	}
	if env.ReconcileTopic != "" {
		reconcile = ps.Publisher(env.ReconcileTopic)
	}
	p := &pipeline.Pipeline{
		Lake: lake, Sources: sources, Coordination: pipeline.Coordinate(co), Waker: waker,
		Config: env.Config, Holder: holder, MergeBudget: env.MergeBudget, LeaseTTL: env.LeaseTTL, Logger: logger,
	}
	return &Services{Pipeline: p, Env: env, DeadLetter: dead, reconcile: reconcile, close: func() {
		for _, pub := range []*pubsub.Publisher{wake, dead, reconcile} {
			if pub != nil {
				pub.Stop()
			}
		}
		ps.Close()
		fs.Close()
		closeStorage()
	}}, nil
}

// WakeMessage is the body of a merge wake-up.
type WakeMessage struct {
	Table string `json:"table"`
}

type pubsubWaker struct{ p *pubsub.Publisher }

func (w pubsubWaker) Wake(ctx context.Context, tableID string) error {
	b, _ := json.Marshal(WakeMessage{Table: tableID})
	opcount.Add(ctx, opcount.PubSubPublish, 1)
	_, err := w.p.Publish(ctx, &pubsub.Message{Data: b, Attributes: map[string]string{"table": tableID}}).Get(ctx)
	return err
}

// DeadLetter is what onfile publishes for a quarantined file.
type DeadLetter struct {
	Bucket     string `json:"bucket"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	Table      string `json:"table,omitempty"`
	Reason     string `json:"reason"`
}

// PublishDeadLetter sends a dead letter when a topic is configured.
func (s *Services) PublishDeadLetter(ctx context.Context, d DeadLetter) error {
	if s.DeadLetter == nil {
		return nil
	}
	b, _ := json.Marshal(d)
	opcount.Add(ctx, opcount.PubSubPublish, 1)
	_, err := s.DeadLetter.Publish(ctx, &pubsub.Message{Data: b, Attributes: map[string]string{"reason": "quarantined"}}).Get(ctx)
	return err
}
