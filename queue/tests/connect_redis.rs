//! `queue::connect` opens the Redis backend for `redis://` URLs (a server
//! from `QUEUE_TEST_REDIS_URL`, default the local one).

#[tokio::test]
async fn a_redis_url_opens_the_redis_backend() {
    let url = std::env::var("QUEUE_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let storage = queue::connect(&url).await.unwrap_or_else(|error| {
        panic!("Redis at {url} is unreachable ({error}): start redis-server or set QUEUE_TEST_REDIS_URL")
    });
    assert_eq!(storage.backend(), "redis");
    assert!(storage.as_redis().is_some());
}

#[tokio::test]
async fn a_tls_redis_url_is_an_invalid_url() {
    let error = queue::connect("rediss://127.0.0.1:6379")
        .await
        .expect_err("no TLS client in this build");
    assert_eq!(error.invalid_field(), Some("url"), "{error:?}");
}
