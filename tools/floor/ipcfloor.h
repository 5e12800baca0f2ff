// What the IPC floors (ipcimport.c, ipchandoff.c) share: the driver call check and
// passing a descriptor over a Unix socket (SCM_RIGHTS, one byte of data beside it).
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { const char* s_; cuGetErrorName(r_, &s_); fprintf(stderr, "%d: %s: %s\n", __LINE__, #x, s_); exit(1);} } while (0)
static void sendfd(int s, int fd) {
	char b = 0; struct iovec io = {&b, 1}; char c[CMSG_SPACE(sizeof(int))]; memset(c, 0, sizeof c);
	struct msghdr m = {0}; m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = c; m.msg_controllen = sizeof c;
	struct cmsghdr* h = CMSG_FIRSTHDR(&m); h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	if (sendmsg(s, &m, 0) != 1) { perror("sendmsg"); exit(2); }
}
static int recvfd(int s) {
	char b; struct iovec io = {&b, 1}; char c[CMSG_SPACE(sizeof(int))];
	struct msghdr m = {0}; m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = c; m.msg_controllen = sizeof c;
	if (recvmsg(s, &m, 0) != 1) { perror("recvmsg"); exit(3); }
	int fd; memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
	return fd;
}
