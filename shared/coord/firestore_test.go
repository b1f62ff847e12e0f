package coord_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/internal/firestoretest"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperDirEnv) != "" {
		os.Exit(m.Run()) // a helper process of TestLocalTwoProcesses needs no emulator
	}
	firestoretest.Main(m)
}

func TestFirestoreConformance(t *testing.T) {
	client := firestoretest.NewClient(t)
	var n atomic.Int64
	// Every test gets its own collections, so tests never see each other.
	prefix := fmt.Sprintf("t%d_", time.Now().UnixNano())
	coordtest.Run(t, func(t *testing.T, now func() time.Time) coord.Coordinator {
		c, err := coord.NewFirestore(context.Background(), client, coord.FirestoreOptions{
			Prefix: fmt.Sprintf("%s%d_", prefix, n.Add(1)),
			Now:    now,
		})
		if err != nil {
			t.Fatalf("NewFirestore: %v", err)
		}
		return c
	})
}
