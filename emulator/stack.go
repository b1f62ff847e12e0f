package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/dsdelta/dsdelta/internal/emuproc"
	"github.com/dsdelta/dsdelta/internal/fakegcs"
	"github.com/dsdelta/dsdelta/shared/config"
)

// ErrMissingTool is returned by Start when a program the stack needs is not
// installed.
var ErrMissingTool = errors.New("missing tool")

// stopGrace is how long Close lets each part end after SIGTERM.
const stopGrace = 10 * time.Second

// The functions the stack serves, by their entry point in the root package.
const (
	FuncOnFile  = "OnFile"
	FuncMerge   = "Merge"
	FuncCompact = "Compact"
)

// DefaultMergeBudget bounds a merge invocation of the stack unless
// Options.MergeBudget says otherwise.
const DefaultMergeBudget = 2 * time.Minute

// Options configure a Stack.
type Options struct {
	// DataDir holds the processes' logs and the Pub/Sub emulator's data; a
	// temporary directory, removed by Close, when empty.
	DataDir string
	// BasePort is the first of six consecutive ports (Pub/Sub, Firestore,
	// fake-gcs-server, onfile, merge, compact); 0 picks free ports.
	BasePort int
	// Project is the Google Cloud project the emulators serve.
	Project string
	// SourceBucket receives Datastream files; SourcePrefix, when set, is the
	// stream's path prefix in it (only objects below it are notified).
	SourceBucket, SourcePrefix string
	// LakeBucket holds the Delta tables.
	LakeBucket string
	// Tick is the compaction schedule; 0 disables the scheduler.
	Tick time.Duration
	// MergeBudget bounds one merge invocation (DSDELTA_MERGE_BUDGET);
	// DefaultMergeBudget when 0.
	MergeBudget time.Duration
	// LeaseTTL is the table lease's time to live (DSDELTA_LEASE_TTL); the
	// pipeline's default when zero. A short TTL lets a crashed merge's
	// table be taken over quickly.
	LeaseTTL time.Duration
	// LogLevel is DSDELTA_LOG_LEVEL for the functions ("" = info).
	LogLevel string
	// Config is DSDELTA_CONFIG for the functions: inline YAML or JSON
	// ("" = defaults). Start refuses one that shared/config refuses.
	Config string
	// DropNotifications is the share (0 to 1) of object notifications the
	// stack loses on purpose: their push is acknowledged without reaching
	// onfile, as if GCS had never sent them, and the object's name is
	// recorded (Stack.Dropped). Draws are seeded by DropSeed;
	// Stack.SetDropRate changes the share while the stack runs. For tests
	// of the reconcile, whose topic never passes this filter.
	DropNotifications float64
	DropSeed          uint64
	// FunctionEnv is added to every function server's environment, after
	// the stack's own variables, e.g. GOMEMLIMIT as terraform sets it.
	FunctionEnv []string
	// FunctionLogs, when set, also receives the functions' log lines,
	// prefixed with the function's name.
	FunctionLogs io.Writer
	// Server is the command that serves one function when started with
	// DSDELTA_EMULATOR_SERVE set, as the emulator's binary (main) and its
	// test binary (TestMain) do. The running executable when empty.
	Server []string
}

func (o *Options) defaults() {
	if o.Project == "" {
		o.Project = "dsdelta-local"
	}
	if o.SourceBucket == "" {
		o.SourceBucket = "datastream"
	}
	if o.LakeBucket == "" {
		o.LakeBucket = "lake"
	}
	o.SourcePrefix = strings.Trim(o.SourcePrefix, "/")
	if o.MergeBudget <= 0 {
		o.MergeBudget = DefaultMergeBudget
	}
}

// validate refuses what the stack or its functions would fail on later.
func (o *Options) validate() error {
	if !(o.DropNotifications >= 0 && o.DropNotifications <= 1) {
		return fmt.Errorf("DropNotifications %v is not a share between 0 and 1", o.DropNotifications)
	}
	if _, err := config.Parse([]byte(o.Config)); err != nil {
		return fmt.Errorf("the functions' configuration (Options.Config): %w", err)
	}
	return nil
}

// function is one served entry point.
type function struct {
	target string
	port   int
	env    []string
	proc   *emuproc.Process
}

// Stack is the running local system: the official Pub/Sub and Firestore
// emulators, fake-gcs-server publishing object notifications to Pub/Sub,
// the three functions served by functions-framework-go with push
// subscriptions to each, and a scheduler.
type Stack struct {
	opts      Options
	dir       string
	removeDir bool
	ports     [6]int

	mu        sync.Mutex         // guards procs and functions[*].proc
	procs     []*emuproc.Process // emulators and fake-gcs-server, in start order
	functions map[string]*function
	logs      []*os.File

	pubsub  *pubsub.Client
	storage *storage.Client
	// drops stands between the notification topic and onfile.
	drops *dropFilter

	stopTicker context.CancelFunc
	tickerDone chan struct{}
}

// Port indexes into Stack.ports.
const (
	portPubSub = iota
	portFirestore
	portGCS
	portOnFile
	portMerge
	portCompact
)

// CheckTools returns an error naming what is missing to run the stack.
func CheckTools() error {
	var missing []string
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		missing = append(missing, "gcloud (the Google Cloud CLI) is not on PATH")
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, "java (17 or newer, for the emulators) is not on PATH")
	}
	if gcloud != "" {
		out, err := exec.Command(gcloud, "info", "--format=value(installation.sdk_root)").Output()
		root := strings.TrimSpace(string(out))
		if err != nil || root == "" {
			missing = append(missing, "gcloud info does not name the SDK root")
		} else {
			for dir, component := range map[string]string{"pubsub-emulator": "pubsub-emulator", "cloud-firestore-emulator": "cloud-firestore-emulator"} {
				if _, err := os.Stat(filepath.Join(root, "platform", dir)); err != nil {
					missing = append(missing, fmt.Sprintf("the gcloud component %s is not installed (gcloud components install %s, or the google-cloud-cli-%s package)",
						component, component, strings.TrimPrefix(component, "cloud-")))
				}
			}
		}
	}
	if _, err := fakegcs.Binary(context.Background()); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrMissingTool, strings.Join(missing, "; "))
	}
	return nil
}

// Start starts the whole stack and returns when every part answers and the
// topics, subscriptions and buckets exist. On error everything started is
// stopped again.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := CheckTools(); err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, functions: map[string]*function{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.dir = opts.DataDir; s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "dsdelta-emulator-"); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		s.removeDir = true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := s.pickPorts(); err != nil {
		return nil, err
	}

	// The two JVMs start in parallel: each takes several seconds.
	gcloudEnv := []string{"CLOUDSDK_CORE_DISABLE_PROMPTS=1", "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true", "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true"}
	pubsubDir := filepath.Join(s.dir, "pubsub")
	if err := os.MkdirAll(pubsubDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	ps, err := s.start("pubsub-emulator", gcloudEnv, nil, "gcloud", "beta", "emulators", "pubsub", "start",
		"--host-port="+s.host(portPubSub), "--data-dir="+pubsubDir, "--quiet")
	if err != nil {
		return nil, err
	}
	fs, err := s.start("firestore-emulator", gcloudEnv, nil, "gcloud", "emulators", "firestore", "start",
		"--host-port="+s.host(portFirestore), "--quiet")
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		proc *emuproc.Process
		port int
	}{{ps, portPubSub}, {fs, portFirestore}} {
		if err := p.proc.WaitHTTP(ctx, "http://"+s.host(p.port)+"/", 120*time.Second); err != nil {
			return nil, fmt.Errorf("%w (log: %s)", err, s.logPath(p.proc.Name()))
		}
	}

	if s.pubsub, err = newPubSubClient(ctx, opts.Project, s.host(portPubSub)); err != nil {
		return nil, err
	}
	if s.drops, err = startDropFilter(s.FunctionURL(FuncOnFile), opts.DropNotifications, opts.DropSeed); err != nil {
		return nil, err
	}
	subs := []pushSubscription{
		{name: "onfile", topic: TopicNotifications, endpoint: s.drops.URL(), ack: 120 * time.Second, deadLetter: true, maxAttempts: 10},
		// What the reconcile hands over goes straight to onfile: it makes
		// up for lost notifications and must not be lost itself.
		{name: "onfile-reconcile", topic: TopicReconcile, endpoint: s.FunctionURL(FuncOnFile), ack: 120 * time.Second, deadLetter: true, maxAttempts: 10},
		{name: "merge", topic: TopicMerge, endpoint: s.FunctionURL(FuncMerge), ack: 600 * time.Second, deadLetter: true, maxAttempts: 20},
		{name: "compact", topic: TopicCompact, endpoint: s.FunctionURL(FuncCompact), ack: 600 * time.Second},
	}
	// Topics first: fake-gcs-server publishes into an existing topic.
	if err := createTopology(ctx, s.pubsub, opts.Project, subs); err != nil {
		return nil, err
	}

	gcsBin, err := fakegcs.Binary(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissingTool, err)
	}
	gcsArgs := []string{gcsBin, "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(s.ports[portGCS]),
		"-public-host", s.host(portGCS), "-external-url", "http://" + s.host(portGCS), "-log-level", "warn",
		"-event.pubsub-project-id", opts.Project, "-event.pubsub-topic", TopicNotifications,
		"-event.bucket", opts.SourceBucket, "-event.list", "finalize"}
	if opts.SourcePrefix != "" {
		gcsArgs = append(gcsArgs, "-event.object-prefix", opts.SourcePrefix+"/")
	}
	gcs, err := s.start("fake-gcs-server", []string{"PUBSUB_EMULATOR_HOST=" + s.host(portPubSub)}, nil, gcsArgs...)
	if err != nil {
		return nil, err
	}
	if err := gcs.WaitHTTP(ctx, "http://"+s.host(portGCS)+"/storage/v1/b", 15*time.Second); err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, s.logPath(gcs.Name()))
	}
	if s.storage, err = storage.NewClient(ctx, option.WithEndpoint("http://"+s.host(portGCS)+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads()); err != nil {
		return nil, fmt.Errorf("storage client: %w", err)
	}
	for _, b := range []string{opts.SourceBucket, opts.LakeBucket} {
		if err := s.storage.Bucket(b).Create(ctx, opts.Project, nil); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}

	for _, f := range []struct {
		target string
		port   int
	}{{FuncOnFile, portOnFile}, {FuncMerge, portMerge}, {FuncCompact, portCompact}} {
		fn := &function{target: f.target, port: s.ports[f.port], env: s.functionEnv(f.target, s.ports[f.port])}
		s.functions[f.target] = fn
		if err := s.startFunction(ctx, fn); err != nil {
			return nil, err
		}
	}
	if opts.Tick > 0 {
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.stopTicker, s.tickerDone = cancel, make(chan struct{})
		go func() {
			defer close(s.tickerDone)
			runScheduler(tctx, s.pubsub.Publisher(TopicCompact), opts.Tick)
		}()
	}
	return s, nil
}

// pickPorts fills s.ports from the base port, or with free ports.
func (s *Stack) pickPorts() error {
	for i := range s.ports {
		if s.opts.BasePort > 0 {
			s.ports[i] = s.opts.BasePort + i
			l, err := net.Listen("tcp", s.host(i))
			if err != nil {
				return fmt.Errorf("port %d is not free (choose other ports with --ports, or --ports 0 for free ones): %w", s.ports[i], err)
			}
			l.Close()
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		s.ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close() // held until all are picked, so they differ
	}
	return nil
}

func (s *Stack) host(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports[port]))
}

func (s *Stack) logPath(name string) string { return filepath.Join(s.dir, name+".log") }

// start starts a supervised process logging to its file in the data dir
// (and to also, when set). Each part runs in a process group of its own
// under emuproc's supervisor, which stops it even if the emulator itself is
// killed. Stop gives it stopGrace to end.
func (s *Stack) start(name string, env []string, also io.Writer, argv ...string) (*emuproc.Process, error) {
	f, err := os.OpenFile(s.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file for %s: %w", name, err)
	}
	s.mu.Lock()
	s.logs = append(s.logs, f)
	s.mu.Unlock()
	var out io.Writer = f
	if also != nil {
		out = io.MultiWriter(f, &prefixWriter{prefix: "[" + name + "] ", w: also})
	}
	p, err := emuproc.Start(emuproc.Spec{Name: name, Args: argv, Env: env, Output: out, Grace: stopGrace})
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%w: %v", ErrMissingTool, err)
		}
		return nil, err
	}
	if !strings.HasPrefix(name, "function-") {
		s.mu.Lock()
		s.procs = append(s.procs, p)
		s.mu.Unlock()
	}
	return p, nil
}

// functionEnv is the environment of a function server: what the function
// reads in the cloud, pointed at the emulators.
func (s *Stack) functionEnv(target string, port int) []string {
	o := s.opts
	lake := "gs://" + o.LakeBucket
	env := append(s.EmulatorEnv(),
		"DSDELTA_EMULATOR_SERVE=1",
		"FUNCTION_TARGET="+target,
		"PORT="+strconv.Itoa(port),
		"K_SERVICE="+strings.ToLower(target),
		"DSDELTA_PROJECT="+o.Project,
		"DSDELTA_SOURCE_BUCKET="+o.SourceBucket,
		"DSDELTA_SOURCE_PREFIX="+o.SourcePrefix,
		"DSDELTA_LAKE_URL="+lake,
		"DSDELTA_WAKE_TOPIC="+TopicMerge,
		"DSDELTA_DEAD_LETTER_TOPIC="+TopicDeadLetter,
		"DSDELTA_RECONCILE_TOPIC="+TopicReconcile,
		"DSDELTA_MERGE_BUDGET="+o.MergeBudget.String(),
	)
	if o.LeaseTTL > 0 {
		env = append(env, "DSDELTA_LEASE_TTL="+o.LeaseTTL.String())
	}
	if o.LogLevel != "" {
		env = append(env, "DSDELTA_LOG_LEVEL="+o.LogLevel)
	}
	if o.Config != "" {
		env = append(env, "DSDELTA_CONFIG="+o.Config)
	}
	return append(env, o.FunctionEnv...)
}

// startFunction starts a function server and waits until it answers.
func (s *Stack) startFunction(ctx context.Context, fn *function) error {
	argv := s.opts.Server
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the emulator's executable: %w", err)
		}
		argv = []string{exe}
	}
	name := "function-" + strings.ToLower(fn.target)
	p, err := s.start(name, fn.env, s.opts.FunctionLogs, argv...)
	if err != nil {
		return err
	}
	// A listening port means the framework is serving (an HTTP probe
	// would be logged as a malformed event).
	if err := p.WaitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", fn.port), 30*time.Second); err != nil {
		// It never served, so there is nothing for it to finish.
		_ = p.Kill()
		return fmt.Errorf("%w (log: %s)", err, s.logPath(name))
	}
	s.mu.Lock()
	fn.proc = p
	s.mu.Unlock()
	return nil
}

// EmulatorEnv returns the variables that point Google's client libraries
// (and fake-gcs-server, and the dsdelta CLI) at the emulators.
func (s *Stack) EmulatorEnv() []string {
	return []string{
		"PUBSUB_EMULATOR_HOST=" + s.host(portPubSub),
		"FIRESTORE_EMULATOR_HOST=" + s.host(portFirestore),
		"STORAGE_EMULATOR_HOST=" + s.host(portGCS),
		"GOOGLE_CLOUD_PROJECT=" + s.opts.Project,
	}
}

// FunctionURL returns the base URL a function is served at.
func (s *Stack) FunctionURL(target string) string {
	p := map[string]int{FuncOnFile: portOnFile, FuncMerge: portMerge, FuncCompact: portCompact}[target]
	return "http://" + s.host(p)
}

// SetDropRate sets the share (0 to 1, clamped) of object notifications the
// stack loses from now on; see Options.DropNotifications.
func (s *Stack) SetDropRate(p float64) { s.drops.setRate(p) }

// Dropped returns the names of the objects whose notifications the stack
// has lost so far, in the order it lost them.
func (s *Stack) Dropped() []string { return s.drops.droppedNames() }

// Storage returns the stack's client of fake-gcs-server.
func (s *Stack) Storage() *storage.Client { return s.storage }

// PubSub returns the stack's client of the Pub/Sub emulator.
func (s *Stack) PubSub() *pubsub.Client { return s.pubsub }

// Options returns the options the stack runs with, defaults filled in.
func (s *Stack) Options() Options { return s.opts }

// DataDir returns the directory holding the logs.
func (s *Stack) DataDir() string { return s.dir }

// KillFunction kills a function server with SIGKILL, as a crashed instance
// dies: in-flight requests fail and nothing is cleaned up.
func (s *Stack) KillFunction(target string) error {
	s.mu.Lock()
	fn := s.functions[target]
	var p *emuproc.Process
	if fn != nil {
		p, fn.proc = fn.proc, nil
	}
	s.mu.Unlock()
	if fn == nil {
		return fmt.Errorf("no function %q", target)
	}
	if p != nil {
		if err := p.Kill(); err != nil {
			return fmt.Errorf("kill function %s: %w", target, err)
		}
	}
	return nil
}

// FunctionPeakRSS returns the most memory a function server has held
// resident since it (re)started, in bytes: the function's own process, not
// its supervisor. The error wraps errors.ErrUnsupported where the system
// does not report it (see emuproc.Process.PeakRSS).
func (s *Stack) FunctionPeakRSS(target string) (int64, error) {
	s.mu.Lock()
	fn := s.functions[target]
	var p *emuproc.Process
	if fn != nil {
		p = fn.proc
	}
	s.mu.Unlock()
	if p == nil {
		return 0, fmt.Errorf("function %s is not running", target)
	}
	return p.PeakRSS()
}

// RestartFunction starts a killed function server again on its port.
func (s *Stack) RestartFunction(ctx context.Context, target string) error {
	s.mu.Lock()
	fn := s.functions[target]
	s.mu.Unlock()
	if fn == nil {
		return fmt.Errorf("no function %q", target)
	}
	if fn.proc != nil {
		return fmt.Errorf("function %s is running", target)
	}
	return s.startFunction(ctx, fn)
}

// Close stops the scheduler, the functions, fake-gcs-server and the
// emulators, waiting until none of their processes is left.
func (s *Stack) Close() {
	if s.stopTicker != nil {
		s.stopTicker()
		<-s.tickerDone
	}
	s.mu.Lock()
	var procs []*emuproc.Process
	for _, fn := range s.functions {
		if fn.proc != nil {
			procs = append(procs, fn.proc)
			fn.proc = nil
		}
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		procs = append(procs, s.procs[i])
	}
	s.procs = nil
	logs := s.logs
	s.logs = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			if err := p.Stop(); err != nil {
				slog.Warn("emulator: stop", "error", err)
			}
		})
	}
	wg.Wait()
	if s.drops != nil {
		s.drops.close()
		s.drops = nil
	}
	if s.pubsub != nil {
		s.pubsub.Close()
		s.pubsub = nil
	}
	if s.storage != nil {
		s.storage.Close()
		s.storage = nil
	}
	for _, f := range logs {
		f.Close()
	}
	if s.removeDir {
		os.RemoveAll(s.dir)
	}
}

// prefixWriter prefixes every line written through it.
type prefixWriter struct {
	mu      sync.Mutex
	prefix  string
	w       io.Writer
	partial bool // the last write ended mid-line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	var out []byte
	for len(b) > 0 {
		if !p.partial {
			out = append(out, p.prefix...)
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b...)
			p.partial = true
			break
		}
		out = append(out, b[:i+1]...)
		b = b[i+1:]
		p.partial = false
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}

// processes returns every running part, for checks that nothing is left
// after Close.
func (s *Stack) processes() []*emuproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := append([]*emuproc.Process(nil), s.procs...)
	for _, fn := range s.functions {
		if fn.proc != nil {
			ps = append(ps, fn.proc)
		}
	}
	return ps
}
