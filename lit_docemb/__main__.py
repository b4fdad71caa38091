from lit_docemb.commands import main, release_before_exit

if __name__ == "__main__":
    main()
    release_before_exit()
