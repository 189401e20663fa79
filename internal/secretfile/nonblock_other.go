//go:build !unix

package secretfile

const nonblock = 0
