// Package config loads execbox's configuration.
//
// A value comes from, in increasing precedence: its default, the file
// execbox.yaml, an EXECBOX_* environment variable, a command-line flag.
// The file is the one named by --config, else by $EXECBOX_CONFIG, else
// ./execbox.yaml if it exists; with none at all the defaults work. A file
// named explicitly must exist.
//
// Every field has a YAML key path (exec.timeout), an environment variable
// derived from it (EXECBOX_EXEC_TIMEOUT: upper case, dots become
// underscores) and usually a flag (--timeout). Durations are Go durations
// ("90s", "1m30s"); sizes are bytes with an optional binary unit (see
// ParseSize); lists are YAML sequences, or comma-separated in a variable or
// flag (a list flag may also be repeated). An empty variable counts as
// unset.
//
// Unknown keys (and EXECBOX_LIMITS_..., EXECBOX_EXEC_... variables naming
// none), malformed values and invalid settings are errors naming the key
// and where the value came from (file and line, variable or flag), and
// Load reports all of them at once, those of the runtimes' own settings
// (runtimes.NAME) included when it is given the registry. A
// configuration error is never a reason to run with less isolation: the
// CLI stops on it, before anything runs.
package config

import (
	"log/slog"
	"maps"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Config is execbox's configuration. Load builds one; Default returns the
// defaults. A Config is a plain value: build or change one in code, then
// call Validate.
//
// To add a field:
//
//  1. Add it here (or to Exec, Limits or Log) with a yaml tag, a flag tag
//     if it gets a flag (flag:"-" for none), a usage tag, and a doc comment
//     giving its default, YAML key, environment variable and flag. The
//     environment variable and the loading from file, variable and flag
//     follow from the tags. Supported types: string (and string types),
//     int64, float64, time.Duration, Size, []string; mark a path that is
//     relative to the config file with config:"path".
//  2. Set its default in Default.
//  3. Check it in Validate, naming it by its YAML key.
//  4. Carry it to where it takes effect (Spec, ExecRequest, RuntimeOptions,
//     Logger, or a new method).
//  5. Cover it in config_test.go (TestLoadFile's full file) and describe it
//     in docs/configuration.md.
type Config struct {
	// Runtime is the runtime that runs commands: "sandbox" (namespaces,
	// cgroups, seccomp), "local" (host processes), "remote", ... or
	// "auto": the sandbox runtime where its health says it works here,
	// else local, with a note on standard error (once), unless Isolation
	// is "require"; only for what the machine lacks, never because of a
	// configuration error. execbox serve never falls back to local: it
	// takes an explicit "local" for that. Default "auto".
	// YAML runtime, env EXECBOX_RUNTIME, flag --runtime.
	Runtime string `yaml:"runtime" flag:"runtime" usage:"runtime to use (see execbox health); auto: sandbox if it works here, else local"`

	// Isolation says what runtime "auto" does where the sandbox runtime
	// does not work: "prefer" falls back to local, "require" refuses to
	// run. Default "prefer".
	// YAML isolation, env EXECBOX_ISOLATION, flag --isolation.
	Isolation string `yaml:"isolation" flag:"isolation" usage:"with --runtime auto: prefer (fall back to local) or require (refuse without isolation)"`

	// Network is the network of a sandbox: "none" (loopback only),
	// "host", or another the runtime knows ("bridge" or a network's name
	// for docker and devcontainer). It is passed to the runtime as its
	// "network" setting, over runtimes.NAME.network, and checked there: a
	// runtime without network control, or without that network, refuses
	// it. Default "" (the runtime's default: none for sandbox).
	// YAML network, env EXECBOX_NETWORK, flag --network.
	Network string `yaml:"network" flag:"network" usage:"network of the sandbox: none (loopback only), host, or for docker bridge or a network's name"`

	// WorkspaceSize is the disk quota of a sandbox's temporary workspace
	// in bytes (its inodes: runtimes.NAME.workspace_inodes). It is passed
	// to the runtime as its "workspace_size" setting; a runtime without
	// disk quotas refuses it. Default 0 (the runtime's default: 1GiB for
	// sandbox; runtimes.sandbox.workspace_size -1 turns it off).
	// YAML workspace_size, env EXECBOX_WORKSPACE_SIZE, flag --workspace-size.
	WorkspaceSize Size `yaml:"workspace_size" flag:"workspace-size" usage:"disk quota of a temporary workspace (sandbox: bytes, a tmpfs)"`

	// Image is the OCI image a sandbox's root is made from
	// (execbox.Spec.Image): a registry reference, an OCI layout
	// directory or an image tarball. Default "" (the runtime's own root:
	// the host's system directories for sandbox).
	// YAML image, env EXECBOX_IMAGE, flag --image.
	Image string `yaml:"image" flag:"image" usage:"OCI image of the sandbox's root: a reference (python:3.12-slim), an OCI layout directory or a tarball"`

	// Images configures the store images are pulled to and unpacked in,
	// shared by every runtime that uses images and by execbox image.
	Images Images `yaml:"images"`

	// Exec holds the defaults of every command.
	Exec Exec `yaml:"exec"`

	// Limits bound each command's resources. A limit the runtime cannot
	// enforce is an error, never silently ignored.
	Limits Limits `yaml:"limits"`

	// Workspace is the host directory commands run in; it must exist and is
	// never removed. Relative to the config file's directory when set there.
	// Default "" (a new temporary directory per sandbox, removed at the
	// end; `execbox exec` uses the current directory instead).
	// YAML workspace, env EXECBOX_WORKSPACE, flag --workspace.
	Workspace string `yaml:"workspace" flag:"workspace" usage:"host directory to run in" config:"path"`

	// Log configures execbox's own logs (on standard error).
	Log Log `yaml:"log"`

	// Server configures execbox serve: the names it answers to and the
	// maximums of what clients may ask for.
	Server Server `yaml:"server"`

	// Runtimes holds each runtime's own settings, by runtime name; the
	// section of the runtime in use is passed to its factory as
	// execbox.Options.Settings, which decodes it strictly. Default empty.
	// YAML runtimes.NAME; no environment variable or flag.
	Runtimes map[string]map[string]any `yaml:"runtimes"`

	// sources records where each key's value came from; absent means the
	// default (or code).
	sources map[string]source
}

// Images configures the image store (package image).
type Images struct {
	// Dir is where images are cached. Default "" (image.DefaultDir:
	// /var/lib/execbox/images as root, else under $XDG_CACHE_HOME).
	// YAML images.dir, env EXECBOX_IMAGES_DIR, flag --images-dir.
	Dir string `yaml:"dir" flag:"images-dir" usage:"directory of the image cache" config:"path"`

	// MaxSize bounds the unpacked images kept, at every moment: a pull
	// charges each entry its bytes plus 4 KiB as it unpacks, removes the
	// least recently used images no sandbox uses to make room, and
	// otherwise stops with resource_exhausted, leaving nothing behind.
	// Default 0 (no bound).
	// YAML images.max_size, env EXECBOX_IMAGES_MAX_SIZE, flag --images-max-size.
	MaxSize Size `yaml:"max_size" flag:"images-max-size" usage:"bytes of unpacked images kept in the cache"`
}

// Exec holds the command defaults of a Config.
type Exec struct {
	// Timeout bounds each command's wall-clock time; at the end the whole
	// process tree is killed and the result says timed out. 0 means the
	// execbox default. Default 120s.
	// YAML exec.timeout, env EXECBOX_EXEC_TIMEOUT, flag --timeout.
	Timeout time.Duration `yaml:"timeout" flag:"timeout" usage:"wall-clock limit of the command"`

	// GracePeriod is the time between SIGTERM and SIGKILL when a command
	// is stopped. Default 2s.
	// YAML exec.grace_period, env EXECBOX_EXEC_GRACE_PERIOD, flag --grace-period.
	GracePeriod time.Duration `yaml:"grace_period" flag:"grace-period" usage:"time between SIGTERM and SIGKILL"`

	// OutputLimit caps the bytes of each stream kept in the result (its
	// head and tail are kept). Default 16MiB.
	// YAML exec.output_limit, env EXECBOX_EXEC_OUTPUT_LIMIT, flag --output-limit.
	OutputLimit Size `yaml:"output_limit" flag:"output-limit" usage:"bytes of each stream kept in the result"`

	// EnvPolicy says which of the runtime's environment variables reach
	// commands: clean (PATH and LANG only, HOME is the workspace), inherit
	// (all) or allow (clean plus EnvAllow). Default clean.
	// YAML exec.env_policy, env EXECBOX_EXEC_ENV_POLICY, flag --env-policy.
	EnvPolicy execbox.EnvPolicy `yaml:"env_policy" flag:"env-policy" usage:"host variables passed: clean, inherit or allow"`

	// EnvAllow names the variables passed under the allow policy.
	// Default none. YAML exec.env_allow, env EXECBOX_EXEC_ENV_ALLOW
	// (comma-separated), flag --env-allow (repeatable or comma-separated).
	EnvAllow []string `yaml:"env_allow" flag:"env-allow" usage:"variable passed under --env-policy allow"`
}

// Limits are the resource limits of a Config; zero means none. They map to
// execbox.Limits.
type Limits struct {
	// CPUTime caps CPU time (whole seconds, at least 1s). Default none.
	// YAML limits.cpu_time, env EXECBOX_LIMITS_CPU_TIME, flag --cpu-time.
	CPUTime time.Duration `yaml:"cpu_time" flag:"cpu-time" usage:"CPU time limit (at least 1s)"`

	// FileSize caps the size of any file a command writes. Default none.
	// YAML limits.file_size, env EXECBOX_LIMITS_FILE_SIZE, flag --file-size.
	FileSize Size `yaml:"file_size" flag:"file-size" usage:"largest file the command may write"`

	// OpenFiles caps open file descriptors. Default none.
	// YAML limits.open_files, env EXECBOX_LIMITS_OPEN_FILES, flag --open-files.
	OpenFiles int64 `yaml:"open_files" flag:"open-files" usage:"open file descriptor limit"`

	// AddressSpace caps virtual memory; it breaks JIT runtimes (node, the
	// JVM, dotnet), which reserve far more than they use. Default none.
	// YAML limits.address_space, env EXECBOX_LIMITS_ADDRESS_SPACE, flag --address-space.
	AddressSpace Size `yaml:"address_space" flag:"address-space" usage:"virtual memory limit (breaks JIT runtimes)"`

	// Memory caps resident memory (cgroup runtimes). Default none.
	// YAML limits.memory, env EXECBOX_LIMITS_MEMORY, flag --memory.
	Memory Size `yaml:"memory" flag:"memory" usage:"resident memory limit"`

	// PIDs caps processes and threads (cgroup runtimes). Default none.
	// YAML limits.pids, env EXECBOX_LIMITS_PIDS, flag --pids.
	PIDs int64 `yaml:"pids" flag:"pids" usage:"process and thread limit"`

	// CPUs caps CPU bandwidth in cores, e.g. 0.5 (cgroup runtimes).
	// Default none. YAML limits.cpus, env EXECBOX_LIMITS_CPUS, flag --cpus.
	CPUs float64 `yaml:"cpus" flag:"cpus" usage:"CPU bandwidth limit in cores, e.g. 0.5"`
}

// Server configures execbox serve. Every maximum bounds what one client
// request may ask (a size or duration over it is invalid_argument naming
// the field) or how many things may live at once (over it is
// resource_exhausted); 0 means no maximum. The defaults bound every count
// and size; the resource limits (memory, pids, cpus, cpu time) have none
// by default because not every runtime can enforce them, and a maximum
// is also applied as the limit of a sandbox that asks for none, which a
// runtime without that limit refuses.
type Server struct {
	// Hosts are names the Host header of a request may carry, besides
	// localhost, 127.0.0.1, ::1 and the listen address's host; "*"
	// allows any (behind a proxy that checks it). Default none.
	// YAML server.hosts, env EXECBOX_SERVER_HOSTS, flag --allowed-host.
	Hosts []string `yaml:"hosts" flag:"allowed-host" usage:"name clients may reach the server by (Host header), besides loopback names"`

	// MetricsListen, if set, is a second address (HOST:PORT or
	// unix:PATH) serving only GET /metrics, without the token, for a
	// Prometheus that should not hold the API token. The main address
	// serves /metrics too, behind the token. Default none.
	// YAML server.metrics_listen, env EXECBOX_SERVER_METRICS_LISTEN, flag --metrics-listen.
	MetricsListen string `yaml:"metrics_listen" flag:"metrics-listen" usage:"second address (HOST:PORT or unix:PATH) serving only /metrics, without the token"`

	// TenantRegistries are the registries a tenant (an API key that is
	// not an admin's) may name images of: the server pulls a missing
	// image from its own network, which a tenant must not reach through
	// it. Default: public registries (docker.io, ghcr.io, quay.io,
	// registry.k8s.io, public.ecr.aws, mcr.microsoft.com, gcr.io).
	// YAML server.tenant_registries, env EXECBOX_SERVER_TENANT_REGISTRIES, flag --tenant-registry.
	TenantRegistries []string `yaml:"tenant_registries" flag:"tenant-registry" usage:"registry tenants may name images of (default: public registries)"`

	// MaxSandboxes bounds the live sandboxes. Default 64.
	// YAML server.max_sandboxes, env EXECBOX_SERVER_MAX_SANDBOXES, flag --max-sandboxes.
	MaxSandboxes int64 `yaml:"max_sandboxes" flag:"max-sandboxes" usage:"most live sandboxes (0: no maximum)"`

	// MaxProcesses bounds the running processes and execs of one
	// sandbox. Default 64.
	// YAML server.max_processes, env EXECBOX_SERVER_MAX_PROCESSES, flag --max-processes.
	MaxProcesses int64 `yaml:"max_processes" flag:"max-processes" usage:"most running processes per sandbox (0: no maximum)"`

	// MaxSessions bounds the open sessions of one sandbox. Default 16.
	// YAML server.max_sessions, env EXECBOX_SERVER_MAX_SESSIONS, flag --max-sessions.
	MaxSessions int64 `yaml:"max_sessions" flag:"max-sessions" usage:"most open sessions per sandbox (0: no maximum)"`

	// MaxTimeout bounds a command's timeout. Default 1h.
	// YAML server.max_timeout, env EXECBOX_SERVER_MAX_TIMEOUT, flag --max-timeout.
	MaxTimeout time.Duration `yaml:"max_timeout" flag:"max-timeout" usage:"largest command timeout a client may ask for (0: no maximum)"`

	// MaxOutputLimit bounds a command's output limit. Default 64MiB.
	// YAML server.max_output_limit, env EXECBOX_SERVER_MAX_OUTPUT_LIMIT, flag --max-output-limit.
	MaxOutputLimit Size `yaml:"max_output_limit" flag:"max-output-limit" usage:"largest output limit a client may ask for (0: no maximum)"`

	// MaxEventWindow bounds the retained events of a started process.
	// Default 64MiB.
	// YAML server.max_event_window, env EXECBOX_SERVER_MAX_EVENT_WINDOW, flag --max-event-window.
	MaxEventWindow Size `yaml:"max_event_window" flag:"max-event-window" usage:"largest event window a client may ask for (0: no maximum)"`

	// MaxReadSize bounds the limit of a file read. Default 256MiB.
	// YAML server.max_read_size, env EXECBOX_SERVER_MAX_READ_SIZE, flag --max-read-size.
	MaxReadSize Size `yaml:"max_read_size" flag:"max-read-size" usage:"largest file read a client may ask for (0: no maximum)"`

	// MaxUploadSize bounds the body of a tar upload. Default 1GiB.
	// YAML server.max_upload_size, env EXECBOX_SERVER_MAX_UPLOAD_SIZE, flag --max-upload-size.
	MaxUploadSize Size `yaml:"max_upload_size" flag:"max-upload-size" usage:"largest tar upload (0: no maximum)"`

	// MaxResultMemory bounds what the server holds for its callers at
	// once: results of execs and runs (from their start until read),
	// file contents, JSON bodies. Each request reserves its worst case
	// (an exec: twice its output limit) and is refused, 429, when it
	// does not fit; a tenant may hold half of it (keys' own
	// max_result_memory). Default 1GiB; 0: the default.
	// YAML server.max_result_memory, env EXECBOX_SERVER_MAX_RESULT_MEMORY, flag --max-result-memory.
	MaxResultMemory Size `yaml:"max_result_memory" flag:"max-result-memory" usage:"most bytes of results and files the server holds for callers at once"`

	// MinReadRate is the slowest a caller may read a result or a file,
	// in bytes a second after a 10 s grace; a slower reader's connection
	// is ended. Default 1MiB; 0: no minimum.
	// YAML server.min_read_rate, env EXECBOX_SERVER_MIN_READ_RATE, flag --min-read-rate.
	MinReadRate Size `yaml:"min_read_rate" flag:"min-read-rate" usage:"slowest a caller may read a result, bytes a second (then its connection is ended)"`

	// MaxMemory bounds a sandbox's or command's memory limit. Default none.
	// YAML server.max_memory, env EXECBOX_SERVER_MAX_MEMORY, flag --max-memory.
	MaxMemory Size `yaml:"max_memory" flag:"max-memory" usage:"largest memory limit, and the limit of a sandbox asking none (0: no maximum)"`

	// MaxPIDs bounds a sandbox's or command's pids limit. Default none.
	// YAML server.max_pids, env EXECBOX_SERVER_MAX_PIDS, flag --max-pids.
	MaxPIDs int64 `yaml:"max_pids" flag:"max-pids" usage:"largest pids limit, and the limit of a sandbox asking none (0: no maximum)"`

	// MaxCPUs bounds a sandbox's or command's CPU bandwidth. Default none.
	// YAML server.max_cpus, env EXECBOX_SERVER_MAX_CPUS, flag --max-cpus.
	MaxCPUs float64 `yaml:"max_cpus" flag:"max-cpus" usage:"largest cpus limit, and the limit of a sandbox asking none (0: no maximum)"`

	// MaxCPUTime bounds a sandbox's or command's CPU time limit. Default none.
	// YAML server.max_cpu_time, env EXECBOX_SERVER_MAX_CPU_TIME, flag --max-cpu-time.
	MaxCPUTime time.Duration `yaml:"max_cpu_time" flag:"max-cpu-time" usage:"largest CPU time limit, and the limit of a sandbox asking none (0: no maximum)"`

	// KeysFile names a file of API keys (tenants; see Key), YAML or JSON,
	// beside Keys. Default none.
	// YAML server.keys_file, env EXECBOX_SERVER_KEYS_FILE, flag --keys-file.
	KeysFile string `yaml:"keys_file" flag:"keys-file" usage:"file of API keys (tenants), YAML or JSON" config:"path"`

	// Keys are API keys (tenants) in the config file itself; see Key.
	// Default none. YAML server.keys only (a list of mappings); no
	// environment variable or flag.
	Keys []Key `yaml:"keys" config:"own"`
	// PolicyURL, if set, is the policy webhook (http or https): before
	// each create, exec, process start, session open and run, and file
	// change, execbox serve POSTs the action to it as JSON and goes on
	// only if it answers {"allow": true}; if it cannot be asked, the
	// action is refused. Default none.
	// YAML server.policy_url, env EXECBOX_SERVER_POLICY_URL, flag --policy-url.
	PolicyURL string `yaml:"policy_url" flag:"policy-url" usage:"URL of the policy webhook asked before each create, exec, session run and file change"`

	// PolicyTimeout bounds one answer of the policy webhook; an action
	// not answered in time is refused. Default 5s.
	// YAML server.policy_timeout, env EXECBOX_SERVER_POLICY_TIMEOUT, flag --policy-timeout.
	PolicyTimeout time.Duration `yaml:"policy_timeout" flag:"policy-timeout" usage:"how long the policy webhook may take to answer (then the action is refused)"`

	// PolicyTokenEnv names the environment variable holding a bearer
	// token sent to the policy webhook (Authorization: Bearer TOKEN),
	// which tells the hook that execbox is asking. execbox blanks the
	// variable in its own environment, as for its own token. Default
	// none: no Authorization header.
	// YAML server.policy_token_env, env EXECBOX_SERVER_POLICY_TOKEN_ENV, flag --policy-token-env.
	PolicyTokenEnv string `yaml:"policy_token_env" flag:"policy-token-env" usage:"environment variable holding the token sent to the policy webhook"`

	// SandboxTimeout is the lifetime of a sandbox whose spec asks none
	// (timeout_ms): the server closes it that long after its creation,
	// unless a client extends it. Default 1h: a sandbox a client keeps
	// busy (a process looping forever) still ends, and an agent's task
	// rarely needs longer; one that does asks for more, or extends.
	// YAML server.sandbox_timeout, env EXECBOX_SERVER_SANDBOX_TIMEOUT, flag --sandbox-timeout.
	SandboxTimeout time.Duration `yaml:"sandbox_timeout" flag:"sandbox-timeout" usage:"lifetime of a sandbox whose spec asks none (0: none)"`

	// MaxSandboxTimeout bounds a sandbox's lifetime, asked or extended,
	// from its creation. Default 24h: nothing a client forgets lives
	// past a day.
	// YAML server.max_sandbox_timeout, env EXECBOX_SERVER_MAX_SANDBOX_TIMEOUT, flag --max-sandbox-timeout.
	MaxSandboxTimeout time.Duration `yaml:"max_sandbox_timeout" flag:"max-sandbox-timeout" usage:"longest sandbox lifetime a client may ask for or extend to (0: no maximum)"`

	// SandboxIdleTimeout is the idle timeout of a sandbox whose spec
	// asks none (idle_timeout_ms): the server closes it once no call has
	// touched it, no process of it has run and no session of it has been
	// open that long. Default 30m: the sandboxes of a client that crashed
	// or forgot them are freed within half an hour, while an agent
	// thinking between calls (seconds to minutes) keeps its own.
	// YAML server.sandbox_idle_timeout, env EXECBOX_SERVER_SANDBOX_IDLE_TIMEOUT, flag --sandbox-idle-timeout.
	SandboxIdleTimeout time.Duration `yaml:"sandbox_idle_timeout" flag:"sandbox-idle-timeout" usage:"idle timeout of a sandbox whose spec asks none (0: none)"`

	// MaxSandboxIdleTimeout bounds a sandbox's idle timeout. Default 24h.
	// YAML server.max_sandbox_idle_timeout, env EXECBOX_SERVER_MAX_SANDBOX_IDLE_TIMEOUT, flag --max-sandbox-idle-timeout.
	MaxSandboxIdleTimeout time.Duration `yaml:"max_sandbox_idle_timeout" flag:"max-sandbox-idle-timeout" usage:"longest sandbox idle timeout a client may ask for (0: no maximum)"`

	// Pools are the warm pools the server starts with: a list of
	// mappings with the fields of POST /v1/pools (name, runtime, spec,
	// initial, min_idle, max, fallback), spec in its wire form. Default
	// none. YAML server.pools only: a list of mappings has no variable
	// or flag.
	Pools []api.Pool `yaml:"pools" config:"custom"`

	// StateDir is where the server records the sandboxes it holds, so
	// that after it is killed, the next server on the same directory
	// answers their IDs "closed" (lost) rather than "not_found". Default
	// "" (/run/execbox/server as root, else
	// $XDG_RUNTIME_DIR/execbox/server or TMPDIR/execbox-UID/server).
	// YAML server.state_dir, env EXECBOX_SERVER_STATE_DIR, flag --state-dir.
	StateDir string `yaml:"state_dir" flag:"state-dir" usage:"directory recording the server's sandboxes, for the next server after a crash" config:"path"`
}

// Log configures execbox's own logging.
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error.
	// Default warn. YAML log.level, env EXECBOX_LOG_LEVEL, flag --log-level.
	Level string `yaml:"level" flag:"log-level" usage:"log level: debug, info, warn or error"`

	// Format of log lines: text or json. Default text.
	// YAML log.format, env EXECBOX_LOG_FORMAT, flag --log-format.
	Format string `yaml:"format" flag:"log-format" usage:"log format: text or json"`
}

// Default returns the configuration used when nothing is set.
func Default() *Config {
	return &Config{
		Runtime:   RuntimeAuto,
		Isolation: IsolationPrefer,
		Exec: Exec{
			Timeout:     execbox.DefaultTimeout,
			GracePeriod: execbox.DefaultGracePeriod,
			OutputLimit: execbox.DefaultOutputLimit,
			EnvPolicy:   execbox.EnvClean,
		},
		Log: Log{Level: "warn", Format: "text"},
		Server: Server{
			MaxSandboxes:    64,
			MaxProcesses:    64,
			MaxSessions:     16,
			MaxTimeout:      time.Hour,
			MaxOutputLimit:  64 << 20,
			MaxEventWindow:  64 << 20,
			MaxReadSize:     256 << 20,
			MaxUploadSize:   1 << 30,
			MaxResultMemory: 1 << 30,
			MinReadRate:     1 << 20,
			PolicyTimeout:   5 * time.Second,

			SandboxTimeout:        time.Hour,
			MaxSandboxTimeout:     24 * time.Hour,
			SandboxIdleTimeout:    30 * time.Minute,
			MaxSandboxIdleTimeout: 24 * time.Hour,
		},
	}
}

// Spec returns the sandbox spec the configuration describes: workspace,
// environment policy and limits.
func (c *Config) Spec() execbox.Spec {
	return execbox.Spec{
		Workspace: c.Workspace,
		Image:     c.Image,
		EnvPolicy: c.Exec.EnvPolicy,
		EnvAllow:  append([]string(nil), c.Exec.EnvAllow...),
		Limits:    c.Limits.execbox(),
	}
}

// ExecRequest returns a request carrying the configured command defaults
// (timeout, grace period, output limit). The caller sets Command or Shell
// and the rest; environment policy and limits travel in Spec.
func (c *Config) ExecRequest() execbox.ExecRequest {
	return execbox.ExecRequest{
		Timeout:     c.Exec.Timeout,
		GracePeriod: c.Exec.GracePeriod,
		OutputLimit: int64(c.Exec.OutputLimit),
	}
}

// RuntimeOptions returns the options for opening the runtime called name:
// its section of Runtimes (with Network as its "network" setting and
// WorkspaceSize as its "workspace_size", when set) and logger.
func (c *Config) RuntimeOptions(name string, logger *slog.Logger) execbox.Options {
	settings := c.Runtimes[name]
	if c.Network != "" {
		settings = maps.Clone(settings)
		if settings == nil {
			settings = map[string]any{}
		}
		settings["network"] = c.Network
	}
	if c.WorkspaceSize != 0 {
		settings = maps.Clone(settings)
		if settings == nil {
			settings = map[string]any{}
		}
		settings["workspace_size"] = int64(c.WorkspaceSize)
	}
	if name == "sandbox" && (c.Images.Dir != "" || c.Images.MaxSize != 0) {
		settings = maps.Clone(settings)
		if settings == nil {
			settings = map[string]any{}
		}
		if c.Images.Dir != "" {
			settings["image_dir"] = c.Images.Dir
		}
		if c.Images.MaxSize != 0 {
			settings["image_max_size"] = int64(c.Images.MaxSize)
		}
	}
	return execbox.Options{Logger: logger, Settings: settings}
}

func (l Limits) execbox() execbox.Limits {
	return execbox.Limits{
		CPUTime:      l.CPUTime,
		FileSize:     int64(l.FileSize),
		OpenFiles:    l.OpenFiles,
		AddressSpace: int64(l.AddressSpace),
		Memory:       int64(l.Memory),
		PIDs:         l.PIDs,
		CPUs:         l.CPUs,
	}
}
