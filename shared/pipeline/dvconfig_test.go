package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TestAnUnknownDeletionVectorsValueStopsTheMergeBeforeItWrites covers a
// Config built in code, which Load's validation never saw.
func TestAnUnknownDeletionVectorsValueStopsTheMergeBeforeItWrites(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 5, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 5, Changes: 10},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{Tables: map[string]config.TableConfig{"shop.customers": {DeletionVectors: "sometimes"}}})
	for _, n := range write(t, ctx, source, sim.Files) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.MergeTable(ctx, "shop.customers")
	if err == nil || !strings.Contains(err.Error(), `deletion_vectors: "sometimes" is not on or off`) {
		t.Fatalf("merge error %v, want the bad setting named with the allowed values", err)
	}
	for _, dir := range []string{"shop/customers/", "shop/customers_log/", "shop/customers_tombstones/"} {
		err := p.Lake.List(ctx, dir, "", func(info objstore.Info) error {
			t.Errorf("%s was written: %s", dir, info.Name)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
