//! Command line: `waymark serve`, `waymark project create` and `waymark project keys`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use shared::AppState;
use shared::config::Env;
use shared::domain::keys;
use shared::domain::projects::{self, ChosenKeys};
use shared::store::{DynamoStore, EmbeddedStore, TableNames};

#[derive(Parser)]
#[command(name = "waymark", version, about = "Waymark location-tracking backend")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every endpoint on 127.0.0.1.
    Serve {
        #[arg(long, default_value_t = 3000)]
        port: u16,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Manage projects.
    Project {
        #[command(subcommand)]
        command: ProjectCommand,
    },
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// Create a project and print its keys as JSON (they are shown only this once).
    Create {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List, create or revoke a project's keys (as `/v1/api/keys/` does).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Print the project's keys as JSON (never the keys themselves).
    List {
        #[arg(long)]
        project_id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Issue a key and print it as JSON (it is shown only this once).
    Create {
        #[arg(long)]
        project_id: String,
        /// secret, publishable or access.
        #[arg(long)]
        kind: String,
        #[arg(long, default_value = "")]
        label: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a key at once and for good (a project's last secret key cannot be revoked).
    Revoke {
        #[arg(long)]
        project_id: String,
        #[arg(long)]
        key_id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Args)]
struct StoreArgs {
    /// Folder of the embedded store (file `waymark.redb`) and of `default-project.json`.
    #[arg(long, default_value = ".waymark", env = "WAYMARK_DATA_DIR")]
    data_dir: PathBuf,
    /// Keep everything in memory; nothing survives the process.
    #[arg(long, conflicts_with = "dynamodb")]
    memory: bool,
    /// Use DynamoDB (also chosen when AWS_ENDPOINT_URL_DYNAMODB is set); missing tables are created.
    #[arg(long)]
    dynamodb: bool,
}

impl StoreArgs {
    fn use_dynamodb(&self) -> bool {
        !self.memory && (self.dynamodb || Env::process().has("AWS_ENDPOINT_URL_DYNAMODB"))
    }

    async fn open(&self) -> Result<AppState, String> {
        self.open_as(false).await
    }

    /// The store, for `waymark serve` when `server`: a local process owns its store, so it is
    /// the only writer of DynamoDB tables too (as of a file's lock): what a request left half
    /// done before it started was left by a process that is gone (`Store::sole_writer_since`).
    /// Two servers on the same tables break that: a restart would take the other's batches
    /// still being stored for abandoned ones.
    async fn open_as(&self, server: bool) -> Result<AppState, String> {
        let state = if self.use_dynamodb() {
            let store = DynamoStore::from_env(TableNames::from_env(Env::process(), "waymark-")).await;
            AppState::new(if server { store.sole_writer() } else { store })
        } else if self.memory {
            AppState::new(EmbeddedStore::memory().map_err(|e| e.to_string())?)
        } else {
            let path = self.data_dir.join("waymark.redb");
            AppState::new(EmbeddedStore::open(&path).map_err(|e| format!("opening {}: {e}", path.display()))?)
        };
        state.store.ensure_tables().await.map_err(|e| format!("creating tables: {e}"))?;
        Ok(state)
    }

    /// Where `default-project.json` goes (the data dir, also with DynamoDB; not with --memory).
    fn key_file_dir(&self) -> Option<PathBuf> {
        (!self.memory).then(|| self.data_dir.clone())
    }
}

fn env_keys() -> ChosenKeys {
    let var = |k| Env::process().get(k).map(str::to_owned);
    ChosenKeys {
        api_key: var("WAYMARK_API_KEY"),
        publishable_key: var("WAYMARK_PUBLISHABLE_KEY"),
        access_token: var("WAYMARK_ACCESS_TOKEN"),
    }
}

pub fn main() -> ExitCode {
    shared::http::init_tracing();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Project { command: ProjectCommand::Create { name, store } } => {
            let state = store.open().await?;
            let issued =
                projects::create(state.store.as_ref(), &name, &ChosenKeys::default()).await.map_err(|e| e.msg)?;
            println!("{}", serde_json::to_string_pretty(&issued).map_err(|e| e.to_string())?);
            Ok(())
        }
        Command::Project { command: ProjectCommand::Keys { command } } => keys_command(command).await,
        Command::Serve { port, store } => serve(port, store).await,
    }
}

async fn keys_command(command: KeysCommand) -> Result<(), String> {
    let out = match command {
        KeysCommand::List { project_id, store } => {
            let state = store.open().await?;
            projects::account_of(state.store.as_ref(), &project_id).await.map_err(|e| e.msg)?;
            serde_json::json!({"keys": keys::list(state.store.as_ref(), &project_id).await.map_err(|e| e.msg)?})
        }
        KeysCommand::Create { project_id, kind, label, store } => {
            let state = store.open().await?;
            let account = projects::account_of(state.store.as_ref(), &project_id).await.map_err(|e| e.msg)?;
            let kind = keys::parse_kind("--kind", &kind).map_err(|e| e.msg)?;
            let label = keys::parse_label(Some(&label)).map_err(|e| e.msg)?;
            let (mut entry, secret) =
                keys::create(state.store.as_ref(), &project_id, &account, kind, &label).await.map_err(|e| e.msg)?;
            entry["key"] = secret.into();
            entry
        }
        KeysCommand::Revoke { project_id, key_id, store } => {
            let state = store.open().await?;
            projects::account_of(state.store.as_ref(), &project_id).await.map_err(|e| e.msg)?;
            keys::revoke(state.store.as_ref(), &project_id, &key_id).await.map_err(|e| e.msg)?
        }
    };
    println!("{}", serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?);
    Ok(())
}

async fn serve(port: u16, args: StoreArgs) -> Result<(), String> {
    let limits = crate::guard::Limits::from_env(Env::process())?;
    let state = args.open_as(true).await?;
    let dir = args.key_file_dir();
    if let Some(d) = &dir {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let default =
        projects::ensure_default(state.store.as_ref(), dir.as_deref(), &env_keys()).await.map_err(|e| e.msg)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("binding {addr}: {e}"))?;
    println!("Waymark listening on http://{addr}");
    println!(
        "Default project (also in {}):",
        dir.map(|d| d.join(projects::DEFAULT_PROJECT_FILE).display().to_string())
            .unwrap_or_else(|| "memory only".into())
    );
    println!("{}", serde_json::to_string_pretty(&default).map_err(|e| e.to_string())?);
    crate::background(&state)?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    crate::guard::serve(listener, crate::app(state), limits, shutdown).await
}
