// Package config owns the probe's configuration: the TOML struct, its defaults and its
// validation.
//
// Decoding is strict (flowweight/configs refuses unknown keys and wrong types) and Validate
// reports every problem at once, each naming its key, so that `probe -check-config` tells an
// operator everything wrong with a file in one run. This package must not import the samplers,
// the agent or anything that touches the network: loading a config has no side effects.
package config
