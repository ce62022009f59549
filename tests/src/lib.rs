//! Shared harness of the end-to-end tests: the built binary, a real redis-server, temp homes.
