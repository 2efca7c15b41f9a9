//! `queue dashboard`: the web dashboard on an address, until Ctrl-C.

use std::net::SocketAddr;
use std::sync::Arc;

use queue::AnyStorage;
use queue_dashboard::{DashboardOptions, router};

use crate::CliError;

/// Serves the dashboard over `storage` on `bind`.
pub(crate) async fn dashboard(
    storage: AnyStorage,
    bind: SocketAddr,
    mut options: DashboardOptions,
) -> Result<(), CliError> {
    let token = options.token.take().filter(|t| !t.is_empty());
    if let Some(token) = &token
        && (token.len() < 16
            || !token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)))
    {
        return Err(CliError::usage(
            "the dashboard token must be 16 or more characters of A-Z, a-z, 0-9, '-', '.', '_', '~'",
        ));
    }
    if !bind.ip().is_loopback() && token.is_none() {
        return Err(CliError::usage(format!(
            "binding {bind} exposes the dashboard beyond this machine: set --token or QUEUE_DASHBOARD_TOKEN"
        )));
    }
    options.token = token;
    let backend = storage.backend();
    let app = router(Arc::new(storage), options).map_err(|e| CliError::usage(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {bind}: {e}")))?;
    eprintln!("queue: dashboard on http://{bind}/ ({backend})");
    axum_serve(listener, app).await
}

async fn axum_serve(listener: tokio::net::TcpListener, app: axum::Router) -> Result<(), CliError> {
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::failed(format!("the dashboard stopped: {e}")))
}
