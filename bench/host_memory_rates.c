// One GiB into host memory new to the process, each way the host device
// could take it, in 1 MiB copies: MODE is anonhuge (MADV_POPULATE_WRITE of
// huge pages, then memcpy), anon4k (memcpy into 4 KiB pages), or a memfd with
// any of falloc (fallocate first), pwrite, map (memcpy through a shared
// mapping), pread (read it all back; printed on stderr). Prints the seconds
// of the commit and of the copy, and the process's user and system time.
//   gcc -O2 -o host_memory_rates bench/host_memory_rates.c
//   for m in anonhuge anon4k memfd-pwrite-pread memfd-falloc
//       memfd-falloc-pwrite memfd-map memfd-falloc-map; do ./host_memory_rates $m; done
// (one line). The code below is the one that ran for docs/BENCHMARKS.md.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <linux/falloc.h>
#include <sys/resource.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define G (1ul<<30)
#define C (1ul<<20)
int main(int argc,char**argv){
  const char*m=argv[1]; char*src=malloc(C); memset(src,7,C);
  char*dst=malloc(C); memset(dst,1,C);
  double t0=now(), t1;
  if(!strcmp(m,"anonhuge")){char*p=mmap(0,G,3,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);madvise(p,G,MADV_HUGEPAGE);
    if(madvise(p,G,23))perror("pop");t1=now();for(size_t o=0;o<G;o+=C)memcpy(p+o,src,C);}
  else if(!strcmp(m,"anon4k")){char*p=mmap(0,G,3,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0);madvise(p,G,MADV_NOHUGEPAGE);t1=now();for(size_t o=0;o<G;o+=C)memcpy(p+o,src,C);}
  else {int fd=memfd_create("x",MFD_CLOEXEC);ftruncate(fd,G);
    if(strstr(m,"falloc")){if(fallocate(fd,0,0,G))perror("falloc");}
    t1=now();
    if(strstr(m,"pwrite")){for(size_t o=0;o<G;o+=C)if(pwrite(fd,src,C,o)!=C)perror("pw");}
    if(strstr(m,"map")){char*p=mmap(0,G,3,MAP_SHARED,fd,0);for(size_t o=0;o<G;o+=C)memcpy(p+o,src,C);}
    double t2=now();
    if(strstr(m,"pread")){for(size_t o=0;o<G;o+=C)if(pread(fd,dst,C,o)!=C)perror("pr");}
    fprintf(stderr,"  read %.3f\n",now()-t2);
  }
  double t3=now(); struct rusage ru; getrusage(RUSAGE_SELF,&ru);
  printf("%-16s commit %.3f copy %.3f total %.3f  user %.2f sys %.2f\n",m,t1-t0,t3-t1,t3-t0,ru.ru_utime.tv_sec+ru.ru_utime.tv_usec*1e-6,ru.ru_stime.tv_sec+ru.ru_stime.tv_usec*1e-6);
}
