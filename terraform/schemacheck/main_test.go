package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A cut-down google_pubsub_subscription: a required and an optional+computed
// argument, a computed-only map, and a max-one block holding a computed-only
// attribute.
const testSchema = `{
 "format_version": "1.0",
 "provider_schemas": {
  "registry.terraform.io/hashicorp/google": {
   "provider": {"version": 0, "block": {"attributes": {"project": {"type": "string", "optional": true}}, "block_types": {}}},
   "resource_schemas": {
    "google_pubsub_subscription": {"version": 0, "block": {
     "attributes": {
      "name": {"type": "string", "required": true},
      "ack_deadline_seconds": {"type": "number", "optional": true, "computed": true},
      "effective_labels": {"type": ["map", "string"], "computed": true}
     },
     "block_types": {
      "cloud_storage_config": {"nesting_mode": "list", "max_items": 1, "block": {
       "attributes": {
        "bucket": {"type": "string", "required": true},
        "state": {"type": "string", "computed": true}
       },
       "block_types": {}
      }}
     }
    }}
   },
   "data_source_schemas": {}
  }
 }
}`

func loadTestProvider(t *testing.T) *provider {
	t.Helper()
	path := filepath.Join(t.TempDir(), "google.json")
	if err := os.WriteFile(path, []byte(testSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := loadProvider(path)
	if err != nil {
		t.Fatalf("loadProvider: %v", err)
	}
	return p
}

// subscription builds a value of the test resource; nil arguments are null.
func subscription(t *testing.T, s *tfprotov5.Schema, ackDeadline, effectiveLabels, bucketState *tftypes.Value) tftypes.Value {
	t.Helper()
	typ := s.ValueType().(tftypes.Object)
	csType := typ.AttributeTypes["cloud_storage_config"].(tftypes.List).ElementType
	orNull := func(v *tftypes.Value, t tftypes.Type) tftypes.Value {
		if v == nil {
			return tftypes.NewValue(t, nil)
		}
		return *v
	}
	cs := tftypes.NewValue(csType, map[string]tftypes.Value{
		"bucket": tftypes.NewValue(tftypes.String, "b"),
		"state":  orNull(bucketState, tftypes.String),
	})
	return tftypes.NewValue(typ, map[string]tftypes.Value{
		"name":                 tftypes.NewValue(tftypes.String, "s"),
		"ack_deadline_seconds": orNull(ackDeadline, tftypes.Number),
		"effective_labels":     orNull(effectiveLabels, tftypes.Map{ElementType: tftypes.String}),
		"cloud_storage_config": tftypes.NewValue(typ.AttributeTypes["cloud_storage_config"], []tftypes.Value{cs}),
	})
}

func ptr(v tftypes.Value) *tftypes.Value { return &v }

func TestProviderTypeFromExecutable(t *testing.T) {
	tests := []struct {
		name, arg0, want string
		wantErr          bool
	}{
		{"a versioned plugin name gives its type", "/x/terraform-provider-google_v6.50.0", "google", false},
		{"an unversioned plugin name gives its type", "terraform-provider-archive", "archive", false},
		{"any other executable name is refused", "/tmp/schemacheck", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := providerTypeFromExecutable(tt.arg0)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("providerTypeFromExecutable(%q) = %q, %v; want %q, error %v", tt.arg0, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestLoadProviderServesTheSchemaFile(t *testing.T) {
	p := loadTestProvider(t)
	if p.source != "registry.terraform.io/hashicorp/google" {
		t.Errorf("source = %q", p.source)
	}
	s, ok := p.resources["google_pubsub_subscription"]
	if !ok {
		t.Fatal("google_pubsub_subscription missing")
	}
	if len(s.Block.BlockTypes) != 1 || s.Block.BlockTypes[0].MaxItems != 1 || s.Block.BlockTypes[0].Nesting != tfprotov5.SchemaNestedBlockNestingModeList {
		t.Errorf("cloud_storage_config block = %+v, want a list of at most one", s.Block.BlockTypes)
	}
	for _, a := range s.Block.Attributes {
		if a.Name == "effective_labels" && (!a.Computed || a.Optional || !a.Type.Is(tftypes.Map{ElementType: tftypes.String})) {
			t.Errorf("effective_labels = %+v, want a computed-only map of strings", a)
		}
	}
}

func TestCheckComputedOnly(t *testing.T) {
	p := loadTestProvider(t)
	s := p.resources["google_pubsub_subscription"]
	labels := tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{})
	tests := []struct {
		name  string
		value tftypes.Value
		want  int
	}{
		{"nothing computed-only set is accepted", subscription(t, s, nil, nil, nil), 0},
		{"an optional computed argument may be set", subscription(t, s, ptr(tftypes.NewValue(tftypes.Number, 10)), nil, nil), 0},
		{"a computed-only top-level attribute is reported", subscription(t, s, nil, &labels, nil), 1},
		{"a computed-only attribute in a nested block is reported", subscription(t, s, nil, nil, ptr(tftypes.NewValue(tftypes.String, "ACTIVE"))), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var diags []*tfprotov5.Diagnostic
			if err := checkComputedOnly(s.Block, tt.value, tftypes.NewAttributePath(), &diags); err != nil {
				t.Fatal(err)
			}
			if len(diags) != tt.want {
				t.Fatalf("got %d diagnostics (%+v), want %d", len(diags), diags, tt.want)
			}
		})
	}
}

func TestPlanLeavesUnsetComputedValuesUnknown(t *testing.T) {
	p := loadTestProvider(t)
	s := p.resources["google_pubsub_subscription"]
	planned, err := fillComputed(s.Block, subscription(t, s, ptr(tftypes.NewValue(tftypes.Number, 10)), nil, nil), unknownOf)
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]tftypes.Value
	if err := planned.As(&attrs); err != nil {
		t.Fatal(err)
	}
	if attrs["effective_labels"].IsKnown() {
		t.Error("effective_labels is known after plan, want unknown")
	}
	if !attrs["ack_deadline_seconds"].IsKnown() {
		t.Error("the configured ack_deadline_seconds became unknown")
	}
	var blocks []tftypes.Value
	if err := attrs["cloud_storage_config"].As(&blocks); err != nil {
		t.Fatal(err)
	}
	var cs map[string]tftypes.Value
	if err := blocks[0].As(&cs); err != nil {
		t.Fatal(err)
	}
	if cs["state"].IsKnown() || !cs["bucket"].IsKnown() {
		t.Errorf("cloud_storage_config = %v, want state unknown and bucket as configured", cs)
	}

	applied, err := resolveUnknowns(planned)
	if err != nil {
		t.Fatal(err)
	}
	if !applied.IsFullyKnown() {
		t.Errorf("applied state %v still holds unknown values", applied)
	}
}
