package merge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

func ce(t *testing.T, data string) event.Event {
	t.Helper()
	e := event.New()
	e.SetID("1")
	e.SetType("google.cloud.pubsub.topic.v1.messagePublished")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/wake")
	if err := e.SetData("application/json", []byte(data)); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTable(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(`{"table":"shop.customers"}`))
	cases := []struct {
		name, data, want string
		bad              bool
	}{
		{"a Pub/Sub message with JSON data names the table", `{"message":{"data":"` + b64 + `"},"subscription":"s"}`, "shop.customers", false},
		{"the table attribute wins", `{"message":{"data":"","attributes":{"table":"HR.EMPLOYEES"}}}`, "HR.EMPLOYEES", false},
		{"bare JSON is accepted", `{"table":"public.orders"}`, "public.orders", false},
		{"a message without a table is refused", `{"message":{"data":"e30="}}`, "", true},
		{"an invalid table id is refused", `{"table":"../etc.passwd"}`, "", true},
		{"garbage is refused", `not json`, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Table(ce(t, c.data))
			if c.bad {
				if err == nil {
					t.Fatalf("accepted %q as %q", c.data, got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Table = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// fakeServices answers MergeWakeUp with res and err, and records the tables.
type fakeServices struct {
	res    pipeline.MergeResult
	err    error
	merged []string
}

func (f *fakeServices) MergeWakeUp(_ context.Context, tableID string) (pipeline.MergeResult, error) {
	f.merged = append(f.merged, tableID)
	return f.res, f.err
}

func (f *fakeServices) Log() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestHandle(t *testing.T) {
	ctx := context.Background()
	wake := `{"table":"shop.customers"}`
	errTransient := errors.New("lake unavailable")
	for _, c := range []struct {
		name    string
		data    string
		err     error // what MergeWakeUp returns
		want    error // what Handle returns (errors.Is), nil for an acknowledgement
		tables  int   // MergeWakeUp calls
		builder error // the services fail to build
	}{
		{name: "a wake-up merges its table and is acknowledged", data: wake, tables: 1},
		{name: "a wake-up without a usable table is acknowledged without a merge", data: `{"table":"../etc"}`},
		{name: "a lease lost to another instance is acknowledged, as the new holder merges", data: wake, err: fmt.Errorf("merge: %w", coord.ErrLeaseLost), tables: 1},
		{name: "a table kept by a holder that stopped renewing asks for the wake-up again", data: wake, err: fmt.Errorf("merge: %w", pipeline.ErrLeaseStale), want: pipeline.ErrLeaseStale, tables: 1},
		{name: "a failed merge is returned so that the platform retries", data: wake, err: errTransient, want: errTransient, tables: 1},
		{name: "services that cannot be built fail the event so that it is retried", data: wake, builder: errTransient, want: errTransient},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeServices{err: c.err}
			h := Handler{Services: func(context.Context) (Services, error) {
				if c.builder != nil {
					return nil, c.builder
				}
				return f, nil
			}}
			err := h.Handle(ctx, ce(t, c.data))
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Handle = %v, want %v", err, c.want)
			}
			if len(f.merged) != c.tables {
				t.Fatalf("merged %v, want %d merge(s)", f.merged, c.tables)
			}
		})
	}
}
