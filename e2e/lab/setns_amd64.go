package lab

// sysSetns is setns(2) on linux/amd64; package syscall has no constant.
const sysSetns = 308
