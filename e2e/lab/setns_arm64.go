package lab

// sysSetns is setns(2) on linux/arm64; package syscall has no constant.
const sysSetns = 268
