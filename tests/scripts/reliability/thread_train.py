"""Trains 20 steps in a non-daemon thread; the main body returns at once (python waits for the thread)."""
import threading
import time

from train_lib import step


def train():
    time.sleep(0.5)
    for i in range(20):
        step(i)
    print("thread done", flush=True)


threading.Thread(target=train).start()
print("main body over")
