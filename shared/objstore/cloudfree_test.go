package objstore_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// cloudFree are the packages that must link no cloud SDK: objstore, coord
// and the core written over them. Cloud backends are drivers in packages of
// their own (objstore/gcsstore, coord/firestorecoord), imported only by the
// programs that run in the cloud, so that the embedded mode, the engine and
// the use cases build without them.
var cloudFree = []string{"objstore", "coord", "pipeline", "delta", "cdc", "datastream", "config", "value"}

// cloudSDK are the import path prefixes of the cloud client libraries and of
// what they bring along.
var cloudSDK = []string{"cloud.google.com/", "google.golang.org/api/", "google.golang.org/grpc", "github.com/googleapis/", "go.opentelemetry.io/"}

func TestCorePackagesLinkNoCloudSDK(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH, so the imports cannot be listed")
	}
	pkgs := make([]string, len(cloudFree))
	for i, p := range cloudFree {
		pkgs[i] = "github.com/dsdelta/dsdelta/shared/" + p
	}
	// Each package with its imports, to show how an SDK is reached.
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, pkgs...)
	out, err := exec.CommandContext(t.Context(), goTool, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	for _, p := range pkgs {
		if _, ok := imports[p]; !ok {
			t.Fatalf("go list did not list %s:\n%s", p, out)
		}
		if chain := sdkChain(p, imports); chain != nil {
			t.Errorf("%s links a cloud SDK: %s; the code that needs it belongs in a driver package", p, strings.Join(chain, " -> "))
		}
	}
}

// sdkChain returns a shortest import chain from pkg to a cloud SDK package,
// or nil.
func sdkChain(pkg string, imports map[string][]string) []string {
	from := map[string]string{pkg: ""}
	for queue := []string{pkg}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if slices.ContainsFunc(cloudSDK, func(prefix string) bool { return strings.HasPrefix(p, prefix) }) {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range imports[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}
