// Command schemacheck-provider is a stand-in Terraform provider that serves a
// real provider's schema (rebuilt by extract.js from the CDK for Terraform
// prebuilt bindings) and nothing else, so that `terraform validate` and
// `terraform test` can check this repository's configuration against the
// google provider's schema where the provider itself cannot be downloaded.
//
// Terraform core does the checking: unknown arguments, blocks written as
// attributes and the reverse, missing required arguments, wrong value types,
// values for computed-only attributes, references to attributes that do not
// exist, and too many or too few nested blocks are all reported by core from
// the schema alone. The stand-in only answers the plugin protocol:
// plan marks computed values unknown, apply and data source reads fill them
// with placeholders. It never talks to an API.
//
// It is started by Terraform, not by hand: run.sh installs it in a plugin
// directory under the names terraform-provider-google and
// terraform-provider-archive, and the provider type is taken from the
// executable's name. The schema is read from $SCHEMACHECK_SCHEMA_DIR/<type>.json.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tfprotov5/tf5server"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func main() {
	providerType, err := providerTypeFromExecutable(os.Args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir := os.Getenv("SCHEMACHECK_SCHEMA_DIR")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "schemacheck-provider: SCHEMACHECK_SCHEMA_DIR is not set")
		os.Exit(2)
	}
	p, err := loadProvider(filepath.Join(dir, providerType+".json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := tf5server.Serve(p.source, func() tfprotov5.ProviderServer { return p }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// providerTypeFromExecutable turns terraform-provider-google_v6.50.0 into google.
func providerTypeFromExecutable(arg0 string) (string, error) {
	name := filepath.Base(arg0)
	rest, ok := strings.CutPrefix(name, "terraform-provider-")
	if !ok {
		return "", fmt.Errorf("schemacheck-provider: executable %q must be named terraform-provider-<type>[_v<version>]", name)
	}
	typ, _, _ := strings.Cut(rest, "_")
	return typ, nil
}

// The JSON form of `terraform providers schema -json`, as far as used here.
type jsonSchemas struct {
	ProviderSchemas map[string]jsonProvider `json:"provider_schemas"`
}

type jsonProvider struct {
	Provider          jsonSchema            `json:"provider"`
	ResourceSchemas   map[string]jsonSchema `json:"resource_schemas"`
	DataSourceSchemas map[string]jsonSchema `json:"data_source_schemas"`
}

type jsonSchema struct {
	Version int64     `json:"version"`
	Block   jsonBlock `json:"block"`
}

type jsonBlock struct {
	Attributes map[string]jsonAttribute `json:"attributes"`
	BlockTypes map[string]jsonBlockType `json:"block_types"`
}

type jsonAttribute struct {
	Type     json.RawMessage `json:"type"`
	Required bool            `json:"required"`
	Optional bool            `json:"optional"`
	Computed bool            `json:"computed"`
}

type jsonBlockType struct {
	NestingMode string    `json:"nesting_mode"`
	Block       jsonBlock `json:"block"`
	MinItems    int64     `json:"min_items"`
	MaxItems    int64     `json:"max_items"`
}

// provider serves one provider's schema. Unimplemented protocol methods
// (those newer than the Terraform versions this is used with) fall through to
// the embedded nil interface and would panic, which Terraform reports.
type provider struct {
	tfprotov5.ProviderServer

	source      string
	schema      *tfprotov5.Schema
	resources   map[string]*tfprotov5.Schema
	dataSources map[string]*tfprotov5.Schema
}

func loadProvider(path string) (*provider, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read schema %s: %w", path, err)
	}
	var js jsonSchemas
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("decode schema %s: %w", path, err)
	}
	if len(js.ProviderSchemas) != 1 {
		return nil, fmt.Errorf("schema %s: want exactly one provider, have %d", path, len(js.ProviderSchemas))
	}
	p := &provider{resources: map[string]*tfprotov5.Schema{}, dataSources: map[string]*tfprotov5.Schema{}}
	for source, jp := range js.ProviderSchemas {
		p.source = source
		if p.schema, err = convertSchema(jp.Provider); err != nil {
			return nil, fmt.Errorf("schema %s: provider: %w", path, err)
		}
		for name, s := range jp.ResourceSchemas {
			if p.resources[name], err = convertSchema(s); err != nil {
				return nil, fmt.Errorf("schema %s: resource %s: %w", path, name, err)
			}
		}
		for name, s := range jp.DataSourceSchemas {
			if p.dataSources[name], err = convertSchema(s); err != nil {
				return nil, fmt.Errorf("schema %s: data source %s: %w", path, name, err)
			}
		}
	}
	return p, nil
}

func convertSchema(s jsonSchema) (*tfprotov5.Schema, error) {
	b, err := convertBlock(s.Block)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.Schema{Version: s.Version, Block: b}, nil
}

func convertBlock(jb jsonBlock) (*tfprotov5.SchemaBlock, error) {
	b := &tfprotov5.SchemaBlock{}
	for _, name := range sortedKeys(jb.Attributes) {
		ja := jb.Attributes[name]
		typ, err := tftypes.ParseJSONType(ja.Type) //nolint:staticcheck // the cty JSON type form is exactly what the schema file holds
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		b.Attributes = append(b.Attributes, &tfprotov5.SchemaAttribute{
			Name: name, Type: typ, Required: ja.Required, Optional: ja.Optional, Computed: ja.Computed,
		})
	}
	for _, name := range sortedKeys(jb.BlockTypes) {
		jt := jb.BlockTypes[name]
		inner, err := convertBlock(jt.Block)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		var nesting tfprotov5.SchemaNestedBlockNestingMode
		switch jt.NestingMode {
		case "single":
			nesting = tfprotov5.SchemaNestedBlockNestingModeSingle
		case "list":
			nesting = tfprotov5.SchemaNestedBlockNestingModeList
		case "set":
			nesting = tfprotov5.SchemaNestedBlockNestingModeSet
		case "map":
			nesting = tfprotov5.SchemaNestedBlockNestingModeMap
		default:
			return nil, fmt.Errorf("block %s: unknown nesting mode %q", name, jt.NestingMode)
		}
		b.BlockTypes = append(b.BlockTypes, &tfprotov5.SchemaNestedBlock{
			TypeName: name, Block: inner, Nesting: nesting, MinItems: jt.MinItems, MaxItems: jt.MaxItems,
		})
	}
	return b, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func errorDiag(summary string, err error) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{{Severity: tfprotov5.DiagnosticSeverityError, Summary: summary, Detail: err.Error()}}
}

func (p *provider) GetMetadata(context.Context, *tfprotov5.GetMetadataRequest) (*tfprotov5.GetMetadataResponse, error) {
	resp := &tfprotov5.GetMetadataResponse{ServerCapabilities: &tfprotov5.ServerCapabilities{}}
	for _, name := range sortedKeys(p.resources) {
		resp.Resources = append(resp.Resources, tfprotov5.ResourceMetadata{TypeName: name})
	}
	for _, name := range sortedKeys(p.dataSources) {
		resp.DataSources = append(resp.DataSources, tfprotov5.DataSourceMetadata{TypeName: name})
	}
	return resp, nil
}

func (p *provider) GetProviderSchema(context.Context, *tfprotov5.GetProviderSchemaRequest) (*tfprotov5.GetProviderSchemaResponse, error) {
	return &tfprotov5.GetProviderSchemaResponse{
		ServerCapabilities: &tfprotov5.ServerCapabilities{},
		Provider:           p.schema,
		ResourceSchemas:    p.resources,
		DataSourceSchemas:  p.dataSources,
		Functions:          map[string]*tfprotov5.Function{},
	}, nil
}

func (p *provider) GetResourceIdentitySchemas(context.Context, *tfprotov5.GetResourceIdentitySchemasRequest) (*tfprotov5.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov5.GetResourceIdentitySchemasResponse{IdentitySchemas: map[string]*tfprotov5.ResourceIdentitySchema{}}, nil
}

func (p *provider) PrepareProviderConfig(_ context.Context, req *tfprotov5.PrepareProviderConfigRequest) (*tfprotov5.PrepareProviderConfigResponse, error) {
	return &tfprotov5.PrepareProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (p *provider) ConfigureProvider(context.Context, *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	return &tfprotov5.ConfigureProviderResponse{}, nil
}

func (p *provider) StopProvider(context.Context, *tfprotov5.StopProviderRequest) (*tfprotov5.StopProviderResponse, error) {
	return &tfprotov5.StopProviderResponse{}, nil
}

func (p *provider) GetFunctions(context.Context, *tfprotov5.GetFunctionsRequest) (*tfprotov5.GetFunctionsResponse, error) {
	return &tfprotov5.GetFunctionsResponse{Functions: map[string]*tfprotov5.Function{}}, nil
}

// ValidateResourceTypeConfig rejects values for computed-only attributes,
// which Terraform core leaves to the provider (the real provider's SDK
// reports them as "computed attributes cannot be set").
func (p *provider) ValidateResourceTypeConfig(_ context.Context, req *tfprotov5.ValidateResourceTypeConfigRequest) (*tfprotov5.ValidateResourceTypeConfigResponse, error) {
	s, ok := p.resources[req.TypeName]
	if !ok {
		return &tfprotov5.ValidateResourceTypeConfigResponse{Diagnostics: errorDiag("Unknown resource type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	diags, err := validateConfig(req.Config, s)
	if err != nil {
		diags = errorDiag("Cannot decode config", err)
	}
	return &tfprotov5.ValidateResourceTypeConfigResponse{Diagnostics: diags}, nil
}

func (p *provider) ValidateDataSourceConfig(_ context.Context, req *tfprotov5.ValidateDataSourceConfigRequest) (*tfprotov5.ValidateDataSourceConfigResponse, error) {
	s, ok := p.dataSources[req.TypeName]
	if !ok {
		return &tfprotov5.ValidateDataSourceConfigResponse{Diagnostics: errorDiag("Unknown data source type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	diags, err := validateConfig(req.Config, s)
	if err != nil {
		diags = errorDiag("Cannot decode config", err)
	}
	return &tfprotov5.ValidateDataSourceConfigResponse{Diagnostics: diags}, nil
}

func validateConfig(config *tfprotov5.DynamicValue, s *tfprotov5.Schema) ([]*tfprotov5.Diagnostic, error) {
	v, err := config.Unmarshal(s.ValueType())
	if err != nil {
		return nil, err
	}
	var diags []*tfprotov5.Diagnostic
	err = checkComputedOnly(s.Block, v, tftypes.NewAttributePath(), &diags)
	return diags, err
}

func checkComputedOnly(block *tfprotov5.SchemaBlock, v tftypes.Value, path *tftypes.AttributePath, diags *[]*tfprotov5.Diagnostic) error {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	for _, a := range block.Attributes {
		if cur, ok := attrs[a.Name]; ok && a.Computed && !a.Optional && !a.Required && !cur.IsNull() {
			*diags = append(*diags, &tfprotov5.Diagnostic{
				Severity:  tfprotov5.DiagnosticSeverityError,
				Summary:   "Value for a computed-only attribute",
				Detail:    fmt.Sprintf("%s is computed by the provider and cannot be set in the configuration.", a.Name),
				Attribute: path.WithAttributeName(a.Name),
			})
		}
	}
	for _, nb := range block.BlockTypes {
		cur, ok := attrs[nb.TypeName]
		if !ok || cur.IsNull() || !cur.IsKnown() {
			continue
		}
		bp := path.WithAttributeName(nb.TypeName)
		switch nb.Nesting {
		case tfprotov5.SchemaNestedBlockNestingModeSingle, tfprotov5.SchemaNestedBlockNestingModeGroup:
			if err := checkComputedOnly(nb.Block, cur, bp, diags); err != nil {
				return err
			}
		case tfprotov5.SchemaNestedBlockNestingModeList, tfprotov5.SchemaNestedBlockNestingModeSet:
			var elems []tftypes.Value
			if err := cur.As(&elems); err != nil {
				return fmt.Errorf("block %s: %w", nb.TypeName, err)
			}
			for i, e := range elems {
				ep := bp.WithElementKeyInt(i)
				if nb.Nesting == tfprotov5.SchemaNestedBlockNestingModeSet {
					ep = bp.WithElementKeyValue(e)
				}
				if err := checkComputedOnly(nb.Block, e, ep, diags); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (p *provider) UpgradeResourceState(_ context.Context, req *tfprotov5.UpgradeResourceStateRequest) (*tfprotov5.UpgradeResourceStateResponse, error) {
	s, ok := p.resources[req.TypeName]
	if !ok {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: errorDiag("Unknown resource type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	typ := s.ValueType()
	v, err := req.RawState.UnmarshalWithOpts(typ, tfprotov5.UnmarshalOpts{ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true}})
	if err != nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: errorDiag("Cannot decode state", err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, v)
	if err != nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: errorDiag("Cannot encode state", err)}, nil
	}
	return &tfprotov5.UpgradeResourceStateResponse{UpgradedState: &dv}, nil
}

func (p *provider) ReadResource(_ context.Context, req *tfprotov5.ReadResourceRequest) (*tfprotov5.ReadResourceResponse, error) {
	return &tfprotov5.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

func (p *provider) PlanResourceChange(_ context.Context, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	s, ok := p.resources[req.TypeName]
	if !ok {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("Unknown resource type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	typ := s.ValueType()
	proposed, err := req.ProposedNewState.Unmarshal(typ)
	if err != nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("Cannot decode proposed state", err)}, nil
	}
	prior, err := req.PriorState.Unmarshal(typ)
	if err != nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("Cannot decode prior state", err)}, nil
	}
	planned := proposed
	if !proposed.IsNull() && prior.IsNull() {
		// On create, every computed value the configuration leaves unset is
		// known only after apply, as with the real provider.
		planned, err = fillComputed(s.Block, proposed, unknownOf)
		if err != nil {
			return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("Cannot plan", err)}, nil
		}
	}
	dv, err := tfprotov5.NewDynamicValue(typ, planned)
	if err != nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("Cannot encode plan", err)}, nil
	}
	return &tfprotov5.PlanResourceChangeResponse{PlannedState: &dv, PlannedPrivate: req.PriorPrivate}, nil
}

func (p *provider) ApplyResourceChange(_ context.Context, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	s, ok := p.resources[req.TypeName]
	if !ok {
		return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: errorDiag("Unknown resource type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	typ := s.ValueType()
	planned, err := req.PlannedState.Unmarshal(typ)
	if err != nil {
		return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: errorDiag("Cannot decode planned state", err)}, nil
	}
	if !planned.IsNull() {
		planned, err = resolveUnknowns(planned)
		if err != nil {
			return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: errorDiag("Cannot apply", err)}, nil
		}
	}
	dv, err := tfprotov5.NewDynamicValue(typ, planned)
	if err != nil {
		return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: errorDiag("Cannot encode new state", err)}, nil
	}
	return &tfprotov5.ApplyResourceChangeResponse{NewState: &dv, Private: req.PlannedPrivate}, nil
}

func (p *provider) ImportResourceState(_ context.Context, req *tfprotov5.ImportResourceStateRequest) (*tfprotov5.ImportResourceStateResponse, error) {
	return &tfprotov5.ImportResourceStateResponse{Diagnostics: errorDiag("Import is not supported", fmt.Errorf("the schema stand-in cannot import %s", req.TypeName))}, nil
}

func (p *provider) MoveResourceState(_ context.Context, req *tfprotov5.MoveResourceStateRequest) (*tfprotov5.MoveResourceStateResponse, error) {
	return &tfprotov5.MoveResourceStateResponse{Diagnostics: errorDiag("Moving state is not supported", fmt.Errorf("the schema stand-in cannot move state into %s", req.TargetTypeName))}, nil
}

func (p *provider) UpgradeResourceIdentity(_ context.Context, req *tfprotov5.UpgradeResourceIdentityRequest) (*tfprotov5.UpgradeResourceIdentityResponse, error) {
	return &tfprotov5.UpgradeResourceIdentityResponse{Diagnostics: errorDiag("Resource identity is not supported", fmt.Errorf("the schema stand-in has no identity for %s", req.TypeName))}, nil
}

func (p *provider) ReadDataSource(_ context.Context, req *tfprotov5.ReadDataSourceRequest) (*tfprotov5.ReadDataSourceResponse, error) {
	s, ok := p.dataSources[req.TypeName]
	if !ok {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("Unknown data source type", fmt.Errorf("%s is not in the schema", req.TypeName))}, nil
	}
	typ := s.ValueType()
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("Cannot decode config", err)}, nil
	}
	state, err := fillComputed(s.Block, config, placeholderOf)
	if err != nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("Cannot read", err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, state)
	if err != nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("Cannot encode state", err)}, nil
	}
	return &tfprotov5.ReadDataSourceResponse{State: &dv}, nil
}

func (p *provider) CallFunction(_ context.Context, req *tfprotov5.CallFunctionRequest) (*tfprotov5.CallFunctionResponse, error) {
	return nil, fmt.Errorf("function %s: the schema stand-in has no functions", req.Name)
}

func (p *provider) ValidateEphemeralResourceConfig(context.Context, *tfprotov5.ValidateEphemeralResourceConfigRequest) (*tfprotov5.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov5.ValidateEphemeralResourceConfigResponse{}, nil
}

func (p *provider) OpenEphemeralResource(_ context.Context, req *tfprotov5.OpenEphemeralResourceRequest) (*tfprotov5.OpenEphemeralResourceResponse, error) {
	return &tfprotov5.OpenEphemeralResourceResponse{Diagnostics: errorDiag("Ephemeral resources are not supported", fmt.Errorf("the schema stand-in cannot open %s", req.TypeName))}, nil
}

func (p *provider) RenewEphemeralResource(context.Context, *tfprotov5.RenewEphemeralResourceRequest) (*tfprotov5.RenewEphemeralResourceResponse, error) {
	return &tfprotov5.RenewEphemeralResourceResponse{}, nil
}

func (p *provider) CloseEphemeralResource(context.Context, *tfprotov5.CloseEphemeralResourceRequest) (*tfprotov5.CloseEphemeralResourceResponse, error) {
	return &tfprotov5.CloseEphemeralResourceResponse{}, nil
}

// fillComputed replaces the null computed attributes of an object value of
// block (recursively through its nested blocks) with fill(type, name).
func fillComputed(block *tfprotov5.SchemaBlock, v tftypes.Value, fill func(tftypes.Type, string) tftypes.Value) (tftypes.Value, error) {
	if v.IsNull() || !v.IsKnown() {
		return v, nil
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		return v, fmt.Errorf("decode object: %w", err)
	}
	for _, a := range block.Attributes {
		if cur, ok := attrs[a.Name]; a.Computed && (!ok || cur.IsNull()) {
			attrs[a.Name] = fill(a.Type, a.Name)
		}
	}
	for _, nb := range block.BlockTypes {
		cur, ok := attrs[nb.TypeName]
		if !ok || cur.IsNull() || !cur.IsKnown() {
			continue
		}
		switch nb.Nesting {
		case tfprotov5.SchemaNestedBlockNestingModeSingle, tfprotov5.SchemaNestedBlockNestingModeGroup:
			nv, err := fillComputed(nb.Block, cur, fill)
			if err != nil {
				return v, fmt.Errorf("block %s: %w", nb.TypeName, err)
			}
			attrs[nb.TypeName] = nv
		case tfprotov5.SchemaNestedBlockNestingModeList, tfprotov5.SchemaNestedBlockNestingModeSet:
			var elems []tftypes.Value
			if err := cur.As(&elems); err != nil {
				return v, fmt.Errorf("block %s: %w", nb.TypeName, err)
			}
			for i := range elems {
				nv, err := fillComputed(nb.Block, elems[i], fill)
				if err != nil {
					return v, fmt.Errorf("block %s: %w", nb.TypeName, err)
				}
				elems[i] = nv
			}
			attrs[nb.TypeName] = tftypes.NewValue(cur.Type(), elems)
		}
	}
	return tftypes.NewValue(v.Type(), attrs), nil
}

func unknownOf(t tftypes.Type, _ string) tftypes.Value {
	return tftypes.NewValue(t, tftypes.UnknownValue)
}

// placeholderOf is the value the stand-in makes up for a computed attribute:
// a recognisable string, zero, false or an empty collection.
func placeholderOf(t tftypes.Type, name string) tftypes.Value {
	switch {
	case t.Is(tftypes.String), t.Is(tftypes.DynamicPseudoType):
		return tftypes.NewValue(tftypes.String, "schemacheck-"+name)
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, 0)
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, false)
	case t.Is(tftypes.List{}):
		return tftypes.NewValue(t, []tftypes.Value{})
	case t.Is(tftypes.Set{}):
		return tftypes.NewValue(t, []tftypes.Value{})
	case t.Is(tftypes.Map{}):
		return tftypes.NewValue(t, map[string]tftypes.Value{})
	case t.Is(tftypes.Object{}):
		obj := t.(tftypes.Object)
		vals := map[string]tftypes.Value{}
		for k, at := range obj.AttributeTypes {
			vals[k] = placeholderOf(at, k)
		}
		return tftypes.NewValue(t, vals)
	}
	return tftypes.NewValue(t, nil)
}

// resolveUnknowns replaces every unknown value left in a planned state with
// a placeholder, as an apply would with real values.
func resolveUnknowns(v tftypes.Value) (tftypes.Value, error) {
	out, err := tftypes.Transform(v, func(path *tftypes.AttributePath, cur tftypes.Value) (tftypes.Value, error) {
		if cur.IsKnown() {
			return cur, nil
		}
		name := "value"
		if steps := path.Steps(); len(steps) > 0 {
			if an, ok := steps[len(steps)-1].(tftypes.AttributeName); ok {
				name = string(an)
			}
		}
		return placeholderOf(cur.Type(), name), nil
	})
	if err != nil {
		return v, fmt.Errorf("resolve unknown values: %w", err)
	}
	return out, nil
}
