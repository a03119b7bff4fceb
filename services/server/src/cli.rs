//! The `pinfold` command line.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Overrides, redact_url};
use crate::devkeys::{DevKey, parse_ttl};
use crate::services::Service;

/// Pinfold: a control plane for MCP servers.
#[derive(Debug, Parser)]
#[command(name = "pinfold", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (SQLite in ./pinfold-data unless configured otherwise).
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate(DbArgs),
    /// Encryption keys: the ids of the configured keys, and re-sealing every
    /// stored secret under the current key (key rotation).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Print a JWT signed with the data directory's dev key.
    Token(TokenArgs),
    /// Print the OpenAPI document the server serves.
    Openapi(OpenapiArgs),
    /// Work with signature documents offline (digest, reduce, verify, diff).
    #[command(subcommand)]
    Signature(crate::signature_cmd::SignatureCommand),
    /// Publish a server card to a Pinfold server, from CI (exit codes in --help).
    Publish(pinfold_cli::publish::PublishArgs),
    /// Capture what a live MCP server lists (HTTP or stdio) as a draft server card; --merge folds several captures into one signature.
    Capture(pinfold_cli::capture::CaptureArgs),
    /// Check a live MCP server against its approved signature in Pinfold (the CI gate against rug pulls).
    Verify(pinfold_cli::verify::VerifyArgs),
    /// Run a local stdio MCP server under its approved signature, for desktop clients that start servers by command: `pinfold guard --url URL --tenant T --server NAME -- COMMAND ARGS`.
    Guard(pinfold_cli::guard::GuardArgs),
}

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// TOML configuration file (also $PINFOLD_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data directory for SQLite and the dev key [default: ./pinfold-data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// postgres://... or sqlite://... [default: SQLite in the data directory].
    #[arg(long)]
    pub database_url: Option<String>,
}

/// `pinfold keys`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print the id of the current encryption key and of each old one (the
    /// <kid> of sealed values `v2.<kid>.<...>`).
    List(DbArgs),
    /// Re-seal every stored secret under the current encryption key:
    /// values under an old key (encryption_keys_old) or without a key id
    /// are sealed again, values already under the current key are left.
    /// Idempotent. Exit 0 when every value opened, 1 when some could not be
    /// opened (listed; left as they are), 2 on a bad configuration or an
    /// unreachable database.
    Reseal(ResealArgs),
}

/// `pinfold keys reseal`.
#[derive(Debug, Clone, Args)]
pub struct ResealArgs {
    /// Database location (the runtime `database_url`, as `serve` uses it).
    #[command(flatten)]
    pub db: DbArgs,
    /// Values read and written per transaction (and tenants listed per page).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub batch_size: u32,
    /// Open and count every value, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `pinfold serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Database location.
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long)]
    pub listen: Option<String>,
    /// Services whose routes to serve: any of tenancy,registry,resolve,scope,guard
    /// [default: all]. /healthz, /readyz, /metrics, /docs and /openapi.json
    /// are always served.
    #[arg(long, value_delimiter = ',')]
    pub services: Option<Vec<String>>,
    /// Dev mode: generate a signing key in the data directory and print tokens.
    #[arg(long)]
    pub dev: bool,
}

/// `pinfold token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// Data directory holding the dev key.
    #[arg(long, default_value = "./pinfold-data")]
    pub data_dir: PathBuf,
    /// The token's subject.
    #[arg(long)]
    pub sub: String,
    /// The tenant the token belongs to: its tenant roles act there and
    /// nowhere else (required for tenant roles).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Comma-separated roles: platform (the platform routes, creating
    /// tenants; no role inside any tenant), and the tenant roles admin,
    /// publisher, reviewer, reader, client (in --tenant only).
    #[arg(long, value_delimiter = ',', required = true)]
    pub roles: Vec<String>,
    /// Lifetime, like 30m, 1h, 7d.
    #[arg(long, default_value = "1h")]
    pub ttl: String,
}

/// `pinfold openapi`.
#[derive(Debug, Clone, Args)]
pub struct OpenapiArgs {
    /// Instead of printing, fail (exit 1) when FILE differs from the generated document.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}

impl DbArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            data_dir: self.data_dir.clone(),
            database_url: self.database_url.clone(),
            ..Overrides::default()
        }
    }
}

/// The exit status of a command whose stdout was closed under it (the
/// reader of a pipe went away, as `head` does): 128 + `SIGPIPE`, what a
/// shell reports for a program that signal ended.
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// Set once a write to stdout failed with a closed pipe.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// The process's stdout, noting a closed pipe (the command then ends with
/// [`EXIT_BROKEN_PIPE`], whatever it was about to say).
pub struct Stdout;

impl Stdout {
    fn noted<T>(r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            STDOUT_CLOSED.store(true, Ordering::SeqCst);
        }
        r
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Self::noted(std::io::stdout().write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::noted(std::io::stdout().flush())
    }
}

/// The process's stderr; a failed write is dropped: there is nowhere left
/// to report it (a closed pipe, `2>&1 | head`), and it must not end the
/// command or panic as `eprintln!` does.
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Runs a parsed command line; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(args) => migrate(args).await,
        Command::Keys(cmd) => keys(cmd, &mut Stdout).await,
        Command::Token(args) => token(args, &mut Stdout),
        Command::Openapi(args) => openapi(args, &mut Stdout),
        Command::Signature(cmd) => crate::signature_cmd::run(cmd, &mut Stdout, &mut Stderr),
        Command::Publish(args) => pinfold_cli::publish::run(args, &mut Stdout, &mut Stderr).await,
        Command::Capture(args) => {
            let mut err = Stderr;
            let terminal = pinfold_cli::progress::Progress::stderr_is_terminal();
            let mut progress = pinfold_cli::progress::Progress::new(&mut err, terminal);
            pinfold_cli::capture::run(args, &mut Stdout, &mut progress).await
        }
        Command::Verify(args) => {
            let mut err = Stderr;
            let terminal = pinfold_cli::progress::Progress::stderr_is_terminal();
            let mut progress = pinfold_cli::progress::Progress::new(&mut err, terminal);
            pinfold_cli::verify::run(args, &mut Stdout, &mut progress).await
        }
        Command::Guard(args) => pinfold_cli::guard::run(args, &mut Stderr).await,
    }
}

/// What `main` does with a parsed command line: runs it and returns the
/// process exit code; an error is printed on one line with its whole
/// cause chain and exits 2. A closed stdout ends the command quietly with
/// [`EXIT_BROKEN_PIPE`] (never a panic, never the usage code).
pub async fn exit_code(cli: Cli) -> i32 {
    let code = match run(cli).await {
        Ok(code) => code,
        Err(_) if STDOUT_CLOSED.load(Ordering::SeqCst) => EXIT_BROKEN_PIPE,
        Err(e) => {
            let _ = writeln!(Stderr, "pinfold: {e:#}");
            2
        }
    };
    if STDOUT_CLOSED.load(Ordering::SeqCst) {
        EXIT_BROKEN_PIPE
    } else {
        code
    }
}

/// The configuration `pinfold serve` runs with: defaults, file, environment,
/// then these flags.
pub fn serve_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut flags = args.db.overrides();
    flags.listen = args.listen.clone();
    flags.services = args.services.clone();
    flags.dev = args.dev.then_some(true);
    Config::load(args.db.config.as_deref(), &flags)
}

async fn serve(args: ServeArgs) -> anyhow::Result<i32> {
    let cfg = serve_config(&args)?;
    let telemetry = crate::telemetry::init(&cfg.telemetry, cfg.log_format())?;
    for var in crate::config::unknown_env_vars() {
        let _ = writeln!(
            Stderr,
            "pinfold: warning: ignoring {var}: it names no setting"
        );
    }
    let db = match cfg.backend()? {
        crate::config::Backend::Sqlite(u) => u,
        crate::config::Backend::Postgres(u) => redact_url(&u),
    };
    let data_dir = cfg.data_dir.clone();
    let served = cfg.services()?;
    let services = served
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ");
    // A path this process answers, for the dev-mode hint.
    let try_path = if served.contains(&Service::Tenancy) {
        "/v1/tenants/dev"
    } else if served.contains(&Service::Registry) {
        "/v1/tenants/dev/servers"
    } else {
        "/readyz"
    };
    let egress_line = if cfg.egress_loopback() {
        "public addresses, tenants' egress_allow, and loopback (development; [egress] allow_loopback)"
    } else {
        "public addresses and tenants' egress_allow"
    };
    let running = crate::serve::start(cfg, None).await?;
    let base = format!("http://{}", running.addr);
    let mut out = Stdout;
    writeln!(
        out,
        "Pinfold {} listening on {base}",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "  database:  {db}")?;
    writeln!(
        out,
        "  services:  {services}   (always: /healthz /readyz /metrics /docs)"
    )?;
    writeln!(
        out,
        "  API docs:  {base}/docs   (OpenAPI: {base}/openapi.json)"
    )?;
    writeln!(out, "  egress:    {egress_line}")?;
    if let Some(t) = &running.dev_tokens {
        writeln!(
            out,
            "\nDev mode: tokens are signed with {} and valid for 12 hours.",
            data_dir.join("dev-signing-key.p8").display()
        )?;
        writeln!(
            out,
            "Tenant \"dev\" is ready. Paste these into your shell:\n"
        )?;
        writeln!(
            out,
            "  export PINFOLD_TOKEN={}          # admin, publisher, reviewer, reader, client in tenant dev",
            t.admin
        )?;
        writeln!(
            out,
            "  export PINFOLD_CLIENT_TOKEN={}   # client in tenant dev",
            t.client
        )?;
        writeln!(
            out,
            "  export PINFOLD_PLATFORM_TOKEN={} # platform: creates tenants (no role inside one)",
            t.platform
        )?;
        if running.console_dev_sign_in {
            writeln!(
                out,
                "\nReview console: {base}/console/t/dev/sign-in   (one-click sign-in as dev-reviewer or dev-admin)"
            )?;
        }
        writeln!(
            out,
            "\nTry:  curl -H \"Authorization: Bearer $PINFOLD_TOKEN\" {base}{try_path}"
        )?;
        writeln!(
            out,
            "More tokens: pinfold token --data-dir {} --sub me --tenant dev --roles reader",
            data_dir.display()
        )?;
    }
    writeln!(out, "\nPress Ctrl-C to stop.")?;
    out.flush()?;
    running.wait().await?;
    // Export the last spans and metrics before exiting.
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    let _ = writeln!(Stderr, "Pinfold stopped.");
    Ok(0)
}

async fn migrate(args: DbArgs) -> anyhow::Result<i32> {
    let cfg = Config::load(args.config.as_deref(), &args.overrides())?;
    let _telemetry = crate::telemetry::init(&cfg.telemetry, cfg.log_format())?;
    // As the owner when one is configured: the runtime role of
    // `database_url` owns nothing and could not apply a migration.
    let mut cfg = cfg;
    if let Some(owner) = cfg.owner_url()? {
        cfg.database_url = owner;
    }
    let store = crate::store::Store::open(&cfg).await?;
    let pending = store.pending_migrations().await?;
    if pending.is_empty() {
        writeln!(
            Stdout,
            "Database is up to date ({}); nothing to apply.",
            store.kind()
        )?;
    } else {
        let _ = writeln!(
            Stderr,
            "Applying {} migration(s): {:?}",
            pending.len(),
            pending
        );
        store.migrate(None).await.context("applying migrations")?;
        writeln!(
            Stdout,
            "Applied {} migration(s) to the {} database.",
            pending.len(),
            store.kind()
        )?;
    }
    store.close().await;
    Ok(0)
}

/// `pinfold keys`: lists the configured key ids, or re-seals every stored
/// secret under the current key; returns the exit code.
pub async fn keys(cmd: KeysCommand, out: &mut (dyn Write + Send)) -> anyhow::Result<i32> {
    match cmd {
        KeysCommand::List(args) => {
            let cfg = Config::load(args.config.as_deref(), &args.overrides())?;
            let ring = crate::registry_wiring::existing_keyring(&cfg)?;
            writeln!(out, "current {}", ring.current_kid())?;
            for kid in ring.old_kids() {
                writeln!(out, "old     {kid}")?;
            }
            Ok(0)
        }
        KeysCommand::Reseal(args) => {
            let cfg = Config::load(args.db.config.as_deref(), &args.db.overrides())?;
            let _telemetry = crate::telemetry::init(&cfg.telemetry, cfg.log_format())?;
            let ring = crate::registry_wiring::existing_keyring(&cfg)?;
            let store = crate::store::Store::open(&cfg).await?;
            let pending = store.pending_migrations().await?;
            if !pending.is_empty() {
                store.close().await;
                bail!(
                    "the database has {} pending migration(s) ({:?}); run `pinfold migrate` first",
                    pending.len(),
                    pending
                );
            }
            let opts = crate::reseal::ResealOptions {
                batch_size: args.batch_size,
                dry_run: args.dry_run,
            };
            let summary = crate::reseal::reseal(&store, &ring, opts, out).await;
            store.close().await;
            Ok(if summary?.total().unopenable > 0 {
                1
            } else {
                0
            })
        }
    }
}

/// `pinfold token`: validates the request and prints one token.
pub fn token(args: TokenArgs, out: &mut dyn Write) -> anyhow::Result<i32> {
    let ttl = parse_ttl(&args.ttl)?;
    let mut roles = Vec::new();
    for r in &args.roles {
        let r = r.trim();
        let Some(role) = pinfold_http::Role::parse(r) else {
            bail!(
                "unknown role {r:?} (known: platform, admin, publisher, reviewer, reader, client)"
            );
        };
        roles.push(role.as_str());
    }
    if args.sub.trim().is_empty() {
        bail!("--sub must not be empty");
    }
    let tenant_roles = roles.iter().any(|r| *r != "platform");
    match &args.tenant {
        Some(t) => {
            pinfold_core::ids::TenantId::parse(t)
                .map_err(|e| anyhow::anyhow!("--tenant {t:?}: {e}"))?;
        }
        None if tenant_roles => bail!("tenant roles ({}) need --tenant", roles.join(",")),
        None => {}
    }
    let key = DevKey::load(&args.data_dir)?;
    let jwt = key.mint(&args.sub, args.tenant.as_deref(), &roles, ttl)?;
    writeln!(out, "{jwt}")?;
    Ok(0)
}

/// `pinfold openapi`: prints the document or checks a file against it.
pub fn openapi(args: OpenapiArgs, out: &mut dyn Write) -> anyhow::Result<i32> {
    let doc = crate::app::openapi_json();
    match args.check {
        None => {
            out.write_all(doc.as_bytes())?;
            Ok(0)
        }
        Some(path) => {
            let committed = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if committed.replace("\r\n", "\n") == doc {
                writeln!(out, "{} is up to date", path.display())?;
                Ok(0)
            } else {
                let _ = writeln!(
                    Stderr,
                    "{} differs from the generated OpenAPI document; regenerate it with `cargo run -p pinfold-server -- openapi > {}`",
                    path.display(),
                    path.display()
                );
                Ok(1)
            }
        }
    }
}
