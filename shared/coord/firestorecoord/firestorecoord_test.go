package firestorecoord_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/internal/firestoretest"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
)

func TestMain(m *testing.M) { firestoretest.Main(m) }

func TestConformance(t *testing.T) {
	client := firestoretest.NewClient(t)
	var n atomic.Int64
	// Every test gets its own collections, so tests never see each other.
	prefix := fmt.Sprintf("t%d_", time.Now().UnixNano())
	coordtest.Run(t, func(t *testing.T, now func() time.Time) coordtest.Coordinator {
		c, err := firestorecoord.New(context.Background(), client, firestorecoord.Options{
			Prefix: fmt.Sprintf("%s%d_", prefix, n.Add(1)),
			Now:    now,
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return c
	})
}
