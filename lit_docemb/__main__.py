from lit_docemb.commands import main

if __name__ == "__main__":
    main()
