// What each namespace adds to a clone (docs/sandbox.md, "A network
// namespace made ahead"): clone with one namespace flag, the init forking
// /bin/true, waited for; each way alternated N times in one loop, in ms.
// Root only.
//   cc -O2 -o /tmp/namespaces bench/sandbox-floor/namespaces.c && /tmp/namespaces 200
// Not part of capflow: a measurement kept with the figures it made.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>
#include <signal.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static char *argvT[]={"/bin/true",NULL};
static int child(void*a){ pid_t c=fork(); if(c==0){execv("/bin/true",argvT);_exit(127);} int st; waitpid(c,&st,0); _exit(0);}
static char stack[1<<16];
int main(int argc,char**argv){
  int n=atoi(argv[1]);
  int fl[]={0,CLONE_NEWPID,CLONE_NEWNS,CLONE_NEWNET,CLONE_NEWIPC,CLONE_NEWUTS,CLONE_NEWCGROUP,CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP, CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP};
  const char*nm[]={"none(init fork)","pid","mount","net","ipc","uts","cgroup","all but net","all"};
  int K=9; double tot[9]={0};
  for(int i=0;i<n;i++) for(int m=0;m<K;m++){ double t0=now(); pid_t p=clone(child,stack+sizeof stack,fl[m]|SIGCHLD,NULL); if(p<0){perror("clone");exit(1);} int st; waitpid(p,&st,0); tot[m]+=now()-t0; }
  for(int m=0;m<K;m++) printf("%-16s %.3f ms\n",nm[m],tot[m]/n);
}
