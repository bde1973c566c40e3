// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * udp-lat: the round trip of plain UDP sockets between two hosts, shaped
 * like ib_send_lat, as the latency reference of make bench (what iperf3
 * TCP is to its bandwidth rows): the same link, user space to user space,
 * with no RDMA at either end.
 *
 *   server: udp-lat [-p PORT]
 *   client: udp-lat [-s SIZE] [-n ITERS] [-p PORT] SERVER
 *
 * The client first connects over TCP to PORT (so that a caller sees the
 * server listen, as for perftest), then sends ITERS datagrams of SIZE
 * bytes to UDP port PORT + 1, each once the answer to the one before has
 * come back. Both ends wait by polling a non-blocking socket, as perftest
 * polls its CQ, so neither sleeps between packets. The client prints one
 * line in the layout of ib_send_lat's results, in microseconds, half of
 * each round trip:
 *
 *   #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
 *
 * (t_typical is the median, as perftest's is). A datagram can be lost: a
 * round trip waits 200 ms at most, then sends again (the first two bytes
 * of a datagram number it, so a late answer is not taken for the next);
 * a run resends 100 times at most.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE 4096
#define RESEND_NS 200000000LL
#define MAX_RESENDS 100

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int udp_socket(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("udp socket");
		exit(1);
	}
	return s;
}

static int serve(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	unsigned char buf[MAX_SIZE];
	struct sockaddr_storage from;
	int one = 1, l, c, u;
	char done;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1)) {
		perror("tcp listen");
		return 1;
	}
	u = udp_socket(port + 1);
	c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("accept");
		return 1;
	}
	/* Answer every datagram at once until the client closes its
	 * connection (a read of 0), which it does once it has its figures.
	 */
	for (;;) {
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(u, buf, sizeof(buf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);

		if (n > 0) {
			if (sendto(u, buf, n, 0, (struct sockaddr *)&from, fl) != n)
				perror("sendto");
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			perror("recvfrom");
			return 1;
		}
		n = recv(c, &done, 1, MSG_DONTWAIT);
		if (n == 0)
			return 0;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			perror("control connection");
			return 1;
		}
	}
}

static int connect_to(const char *host, int port, int type)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = type };
	struct addrinfo *ai;
	char ps[16];
	int s;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai)) {
		fprintf(stderr, "cannot resolve %s\n", host);
		exit(1);
	}
	s = socket(AF_INET, type, 0);
	if (s < 0 || connect(s, ai->ai_addr, ai->ai_addrlen)) {
		perror("connect");
		exit(1);
	}
	freeaddrinfo(ai);
	return s;
}

static int client(const char *host, int port, int size, int iters)
{
	unsigned char out[MAX_SIZE] = { 0 }, in[MAX_SIZE];
	double *t = calloc(iters, sizeof(*t));
	double sum = 0, sq = 0, avg;
	int c, u, i, resends = 0;

	if (!t)
		return 1;
	c = connect_to(host, port, SOCK_STREAM);
	u = connect_to(host, port + 1, SOCK_DGRAM);
	for (i = 0; i < iters; i++) {
		int64_t t0 = now_ns(), sent = t0;
		uint16_t seq = i;

		memcpy(out, &seq, sizeof(seq));
		if (send(u, out, size, 0) != size) {
			perror("send");
			return 1;
		}
		for (;;) {
			ssize_t n = recv(u, in, sizeof(in), MSG_DONTWAIT);
			uint16_t got;

			if (n >= (ssize_t)sizeof(got)) {
				memcpy(&got, in, sizeof(got));
				if (got == seq)
					break;
				continue;
			}
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != ECONNREFUSED) {
				perror("recv");
				return 1;
			}
			if (now_ns() - sent > RESEND_NS) {
				if (++resends > MAX_RESENDS) {
					fprintf(stderr, "more than %d datagrams lost\n",
						MAX_RESENDS);
					return 1;
				}
				send(u, out, size, 0);
				sent = now_ns();
			}
		}
		t[i] = (now_ns() - t0) / 2000.0;
	}
	close(c);
	for (i = 0; i < iters; i++) {
		sum += t[i];
		sq += t[i] * t[i];
	}
	avg = sum / iters;
	qsort(t, iters, sizeof(*t), cmp_double);
	printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
	printf(" %d       %d          %.2f         %.2f      %.2f     \t       %.2f     \t%.2f\t\t%.2f \t\t%.2f\n",
	       size, iters, t[0], t[iters - 1], t[iters / 2], avg,
	       sqrt(fmax(sq / iters - avg * avg, 0)), t[(int)(iters * 0.99)],
	       t[(int)(iters * 0.999)]);
	if (resends)
		printf("resent %d datagrams\n", resends);
	return 0;
}

int main(int argc, char **argv)
{
	int port = 18515, size = 2, iters = 1000, opt;

	while ((opt = getopt(argc, argv, "p:s:n:")) != -1) {
		switch (opt) {
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			size = atoi(optarg);
			break;
		case 'n':
			iters = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (port < 1 || port > 65534 || size < 2 || size > MAX_SIZE || iters < 1)
		goto usage;
	if (optind == argc)
		return serve(port);
	if (optind + 1 == argc)
		return client(argv[optind], port, size, iters);
usage:
	fprintf(stderr, "usage: %s [-p PORT] [-s SIZE (2..%d)] [-n ITERS] [SERVER]\n",
		argv[0], MAX_SIZE);
	return 2;
}
