// Package deploy holds the files of capflow's container deployment
// (compose scripts, Temporal dynamic config) and the tests that check them
// and the repository's Dockerfile and docker-compose.yml without a Docker
// engine (docs/deployment.md).
package deploy
