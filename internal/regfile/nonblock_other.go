//go:build !unix

package regfile

const nonblock = 0

const nofollow = 0
