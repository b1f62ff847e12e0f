package compact

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Services is what the handler uses of a function instance; *gcp.Services
// provides it, and tests fake it.
type Services interface {
	// Reconcile is gcp.Services.Reconcile: a reconcile tick over the
	// configured source.
	Reconcile(ctx context.Context) (pipeline.ReconcileResult, error)
	// MaintainAll is pipeline.Pipeline.MaintainAll.
	MaintainAll(ctx context.Context) (pipeline.MaintainAllResult, error)
	// Log is the instance's logger.
	Log() *slog.Logger
}

// Handler handles the ticks of the maintenance schedule.
type Handler struct {
	// Services returns the instance's services, built on first use.
	Services func(context.Context) (Services, error)
}

// Tasks a tick may ask for.
const (
	TaskReconcile = "reconcile" // find the files no notification announced
	TaskMaintain  = "maintain"  // pipeline.MaintainAll: compaction, checkpoints, vacuum, expiry
)

// Tick is the body of a schedule's message: the tasks to run, all of them
// when empty ("{}", the compaction schedule's message). The reconcile
// schedule asks for {"tasks":["reconcile"]}.
type Tick struct {
	Tasks []string `json:"tasks,omitempty"`
}

// Handle is the CloudEvent entry point: the reconcile, then one
// maintenance round, or the tasks the tick names. A failure of one does not
// stop the other; the errors are returned together, so the tick is
// retried.
func (h Handler) Handle(ctx context.Context, e event.Event) error {
	svc, err := h.Services(ctx)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	tick, err := parseTick(e)
	if err != nil {
		// A message nobody can read asks for nothing in particular: the
		// round does everything rather than nothing.
		svc.Log().Warn("unreadable tick message; running every task", "event", "bad_tick", "error", err)
	}
	var errs []error
	if tick.wants(TaskReconcile) {
		if _, err := svc.Reconcile(ctx); err != nil {
			errs = append(errs, fmt.Errorf("reconcile: %w", err))
		}
	}
	if tick.wants(TaskMaintain) {
		if _, err := svc.MaintainAll(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}

func (t Tick) wants(task string) bool { return len(t.Tasks) == 0 || slices.Contains(t.Tasks, task) }

// parseTick reads the tick from a Pub/Sub push (the scheduler publishes to
// a topic) or from a plain JSON body. An empty body is every task.
func parseTick(e event.Event) (Tick, error) {
	var t Tick
	data := e.Data()
	var push struct {
		Message struct {
			Data string `json:"data"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &push) == nil && push.Message.Data != "" {
		b, err := base64.StdEncoding.DecodeString(push.Message.Data)
		if err != nil {
			return Tick{}, fmt.Errorf("tick message data is not base64: %w", err)
		}
		data = b
	}
	if len(data) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return Tick{}, fmt.Errorf("tick message %q: %w", data, err)
	}
	for _, task := range t.Tasks {
		if task != TaskReconcile && task != TaskMaintain {
			return Tick{}, fmt.Errorf("tick asks for task %q: the tasks are %q and %q", task, TaskReconcile, TaskMaintain)
		}
	}
	return t, nil
}
