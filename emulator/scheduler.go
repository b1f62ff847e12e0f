package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// runScheduler plays Cloud Scheduler: every tick it publishes a message to
// the compaction topic, until ctx ends.
func runScheduler(ctx context.Context, p *pubsub.Publisher, every time.Duration) {
	defer p.Stop()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			body, _ := json.Marshal(map[string]string{"scheduled_at": now.UTC().Format(time.RFC3339)})
			if _, err := p.Publish(ctx, &pubsub.Message{Data: body}).Get(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("scheduler: publish a compaction tick", "error", err)
			}
		}
	}
}
