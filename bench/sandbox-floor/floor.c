// The candidates of docs/sandbox.md ("Why a zygote"), side by side: each
// way of starting /bin/true, alternated N times in one loop, in ms per
// start waited for. Root only (it makes its own mount namespace and
// mounts in it; it expects /var/tmp/zproj/{runs/r1/steps/s1,.capflow}).
//   mkdir -p /var/tmp/zproj/runs/r1/steps/s1 /var/tmp/zproj/.capflow
//   cc -O2 -o /tmp/floor bench/sandbox-floor/floor.c && /tmp/floor 200
// Not part of capflow: a measurement kept with the figures it made.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <signal.h>
#include <linux/mount.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static char *argvT[]={"/bin/true",NULL};
static int wfd=-1, level;
static void die(const char*m){perror(m);_exit(120);}
static void bindp(const char*s,const char*d,int ro){ if(mount(s,d,NULL,MS_BIND|MS_REC,NULL))die(d);
  if(ro){struct mount_attr a={.attr_set=MOUNT_ATTR_RDONLY|MOUNT_ATTR_NOSUID|MOUNT_ATTR_NODEV}; if(syscall(SYS_mount_setattr,AT_FDCWD,d,AT_RECURSIVE,&a,sizeof a))die("setattr");}}
static int child(void*a){
  if(level>=1){
  if(mount("proc","/proc","proc",MS_NOSUID|MS_NODEV|MS_NOEXEC,NULL))die("proc");
  if(mount("tmpfs","/tmp","tmpfs",MS_NOSUID|MS_NODEV,"size=64m"))die("tmpfs");
  }
  if(level>=2){
  bindp("/dev/null","/proc/keys",1); bindp("/dev/null","/proc/key-users",1);
  bindp("/proc/sys","/proc/sys",1);
  if(mount("devpts","/dev/pts","devpts",MS_NOSUID|MS_NOEXEC,"newinstance,ptmxmode=0666,mode=620"))die("pts");
  if(mount("tmpfs","/var/tmp/zproj/runs","tmpfs",MS_NOSUID|MS_NODEV,NULL))die("t2");
  if(mount("tmpfs","/var/tmp/zproj/.capflow","tmpfs",MS_NOSUID|MS_NODEV,NULL))die("t3");
  }
  if(level>=3){
  char p[4096],l[64]; snprintf(l,64,"/proc/self/fd/%d",wfd); int n=readlink(l,p,sizeof p-1); p[n]=0;
  // note: after covering runs, the path is hidden; in real code open_tree before the tmpfs
  }
  pid_t c=fork(); if(c==0){execv("/bin/true",argvT);_exit(127);} int st; waitpid(c,&st,0); _exit(WEXITSTATUS(st));
}
static char stack[1<<16];
int main(int argc,char**argv){
  int n=atoi(argv[1]); wfd=open("/var/tmp/zproj/runs/r1/steps/s1",O_PATH|O_DIRECTORY);
  if(unshare(CLONE_NEWNS))die("unshare");
  if(mount(NULL,"/",NULL,MS_REC|MS_PRIVATE,NULL))die("priv");
  struct mount_attr a={.attr_set=MOUNT_ATTR_RDONLY|MOUNT_ATTR_NOSUID};
  if(syscall(SYS_mount_setattr,AT_FDCWD,"/",AT_RECURSIVE,&a,sizeof a))die("ro");
  mount("proc","/proc","proc",0,NULL);
  const char* hide[]={"/root","/home","/run",0};
  for(int i=0;hide[i];i++) mount("tmpfs",hide[i],"tmpfs",MS_NOSUID|MS_NODEV|MS_RDONLY,NULL);
  FILE*f=fopen("/proc/self/mountinfo","r"); int c=0; char b[4096]; while(fgets(b,sizeof b,f))c++; printf("template mounts %d\n",c);
  double tot[6]={0}; int CL=CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP;
  for(int i=0;i<n;i++) for(int m=0;m<6;m++){
    level=m-1; double t0=now(); pid_t p;
    if(m==0){ p=fork(); if(p==0){execv("/bin/true",argvT);_exit(127);} }
    else if(m==4){ p=fork(); if(p==0){char*a[]={"unshare","--user","--map-root-user","--pid","--mount","--net","--ipc","--uts","--fork","/bin/true",NULL};execv("/usr/bin/unshare",a);_exit(127);} }
    else if(m==5){ p=fork(); if(p==0){char*a[]={"bwrap","--unshare-all","--ro-bind","/","/","--proc","/proc","--dev","/dev","--tmpfs","/tmp","/bin/true",NULL};execv("/usr/bin/bwrap",a);_exit(127);} }
    else p=clone(child,stack+sizeof stack,CL|SIGCHLD,NULL);
    if(p<0)die("clone"); int st; waitpid(p,&st,0);
    if(!WIFEXITED(st)||WEXITSTATUS(st)){fprintf(stderr,"m%d st %x\n",m,st);exit(1);}
    tot[m]+=now()-t0;
  }
  const char*nm[]={"plain fork+exec","ns + init fork","+proc,/tmp","+keys,sys,pts,private","unshare(1) all ns","bwrap floor line"};
  for(int m=0;m<6;m++)printf("%-24s %.3f ms\n",nm[m],tot[m]/n);
}
